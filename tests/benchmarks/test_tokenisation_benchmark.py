"""``python -m torchrl_glam.benchmarks.tokenisation``: a Table 3 tokenisation stream, timed with and
without the memoised pairs."""

from torchrl_glam.benchmarks import tokenisation


def test_the_stream_is_table_3s_acting_and_replayed_batches():
    batches = list(tokenisation.stream(64, num_envs=32, batch_size=8, num_updates=2))
    # per 32 transitions: the 32 acting prompts, then per update the replayed observations and their next ones
    assert [len(rows) for rows in batches] == [32, 8, 8, 8, 8] * 2
    prompt, candidates, mask = batches[1][0]
    assert isinstance(prompt, str) and len(candidates) == len(mask) and mask.any()


def test_the_benchmark_times_both_tokenisers_on_a_decoder_only_model(capsys, offline_model):
    offline_model("offline:tiny-llama")  # not shipped: built here, not by another test first
    tokenisation.main(["--model", "offline:tiny-llama", "--transitions", "64"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ms ")[0].rsplit(" ", 1)[0].strip() for line in lines] == [
        "every pair encoded",
        "memoised pairs",
    ]
    assert all(float(line.split(" ms ")[0].split()[-1]) > 0 for line in lines)
