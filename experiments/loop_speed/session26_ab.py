"""Session 26's three changes to the scorer, each against what it replaced, in one process
(medians of alternating rounds, CPU ms, one thread), on 128 full-set prompts of uneven length
(``benchmarks/scoring.py``'s ``playground_batch`` with 6 objects; 8 candidates each):

1. attention: ``modules/attention.py`` at COMMIT (bias and mask summed, then ``baddbmm``) against
   this tree's (both added in place to the score product), registered in turn as the model's
   attention function; the update-like pass (forward with gradient, backward, forward without)
   and one acting step (32 prompts);
2. memory reuse: the update-like pass in a fresh process without and with
   ``training.runtime.reuse_freed_memory`` (minor page faults per pass, and its time);
3. tokenising: transformers' tokenizer call against ``LLMScorer._encode`` (encode_batch_fast).

    python experiments/loop_speed/session26_ab.py [COMMIT]      # default f7c3c78
"""

import resource
import statistics
import subprocess
import sys
import time

import torch
from scorer_ab import module_at  # this folder's: run as a script

from torchrl_glam.benchmarks.scoring import playground_batch
from torchrl_glam.modules import attention, scoring
from torchrl_glam.modules.loading import LLMConfig, load_llm
from torchrl_glam.training.runtime import reuse_freed_memory


def uneven_batch(size):
    prompts, candidates, mask = playground_batch(size, 6, seed=3)
    prompts = [
        p.replace("You have grown: nothing", "You have grown: " + (", ".join(["blue tree"] * (i % 5)) or "nothing"))
        for i, p in enumerate(prompts)
    ]
    return prompts, candidates, mask


def alternate(functions: dict, rounds: int) -> dict:
    times = {name: [] for name in functions}
    for round_ in range(rounds):
        for name in list(functions) if round_ % 2 else list(functions)[::-1]:
            start = time.process_time()
            functions[name]()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def main(commit="f7c3c78"):
    torch.set_num_threads(1)
    from transformers import AttentionInterface

    llm = load_llm(LLMConfig("offline:tiny-t5-pretrained"))
    scorer = scoring.LLMScorer(llm.model, llm.tokenizer, True)
    batch = uneven_batch(128)

    def update_like():
        scores, action_hidden, prompt_hidden = scorer(*batch)
        (scores.sum() + action_hidden.square().sum() + prompt_hidden.sum()).backward()
        with torch.no_grad():
            scorer(*batch)

    def acting():
        with torch.no_grad():
            scorer(*(part[:32] for part in batch))

    if sys.argv[1:2] == ["--faults"]:  # the child process of part 2
        if sys.argv[2] == "reuse":
            assert reuse_freed_memory()
        update_like(), update_like()
        start_faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        for _ in range(9):
            update_like()
        print(
            (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start_faults) / 9,
            (time.process_time() - start) / 9 * 1e3,
        )
        return
    implementations = {
        commit: module_at(commit, "torchrl_glam/modules/attention.py").tree_attention,
        "this tree": attention.tree_attention,
    }
    print(f"1. attention, {commit} -> this tree (CPU ms, medians of alternating rounds)")
    for label, work, rounds in (("update-like, 128 prompts", update_like, 9), ("acting, 32 prompts", acting, 15)):

        def using(name, work=work):
            return lambda: (AttentionInterface.register(attention.TREE_ATTENTION, implementations[name]), work())

        times = alternate({name: using(name) for name in implementations}, rounds)
        before, after = times.values()
        print(f"   {label}: {before:.1f} -> {after:.1f}  ({before / after:.2f}x)")
    print("2. memory reuse (fresh processes; minor page faults and CPU ms per update-like pass, mean of 9)")
    for mode in ("default", "reuse"):
        out = subprocess.run([sys.executable, __file__, "--faults", mode], check=True, capture_output=True, text=True)
        faults, ms = map(float, out.stdout.split()[-2:])
        print(f"   {mode:<8} {faults:7.0f} faults  {ms:6.1f} ms")
    contexts = [prompt.rstrip() for prompt in batch[0]]
    assert scorer._encode(contexts) == llm.tokenizer(contexts)["input_ids"]
    times = alternate(
        {
            "tokenizer call": lambda: llm.tokenizer(contexts)["input_ids"],
            "encode_batch_fast": lambda: scorer._encode(contexts),
        },
        31,
    )
    print("3. tokenising the 128 prompts: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in times.items()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--faults"]:
        main()
    else:
        main(*sys.argv[1:2])
