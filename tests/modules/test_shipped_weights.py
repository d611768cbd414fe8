"""The offline models shipped in the package: they load instantly (no training, no network, nothing
written), match the code's recipe, and a missing or corrupted file is a clear error; building, when
it happens, is done by one process at a time and says what it does."""

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from torchrl_glam.envs import get_environment
from torchrl_glam.modules import LLMConfig, load_llm
from torchrl_glam.modules.loading import resolve_model_path
from torchrl_glam.offline import pretraining, resolve, shipped, tiny
from torchrl_glam.offline.cache import build_into_cache
from torchrl_glam.offline.models import pretraining_recipe, tiny_model_recipe
from torchrl_glam.offline.pretraining import transcripts_fingerprint
from torchrl_glam.offline.shipped import (
    SHIPPED_MODELS,
    WEIGHTS_DIR,
    ShippedWeightsError,
    read_manifest,
    recipe_version,
    shipped_model_path,
)

CODE_RECIPES = {
    "tiny-t5": tiny_model_recipe("t5"),
    "tiny-t5-pretrained": pretraining_recipe("t5"),
    "tiny-t5-hindsight": pretraining_recipe("t5", data="hindsight"),
    **{
        f"tiny-t5-pretrained-{name}": pretraining_recipe("t5", environment=get_environment(name))
        for name in ("babyai", "textworld_coin_collector", "textworld_treasure_hunter")
    },
}
#: the pretrained models: (transcripts, environment)
PRETRAINED = {
    "tiny-t5-pretrained": ("random", "playground"),
    "tiny-t5-hindsight": ("hindsight", "playground"),
    "tiny-t5-pretrained-babyai": ("random", "babyai"),
    "tiny-t5-pretrained-textworld_coin_collector": ("random", "textworld_coin_collector"),
    "tiny-t5-pretrained-textworld_treasure_hunter": ("random", "textworld_treasure_hunter"),
}


def _forbid(*_args, **_kwargs):
    raise AssertionError("loading a shipped model must not build, train or reach the network")


@pytest.fixture
def no_build_no_network(monkeypatch, tmp_path):
    """Any training, model build or socket connection fails the test; the cache is an empty dir."""
    monkeypatch.setattr(socket.socket, "connect", _forbid)
    monkeypatch.setattr(tiny, "build_tiny_model", _forbid)
    monkeypatch.setattr(pretraining, "_pretrain", _forbid)
    monkeypatch.setattr(tiny, "build_into_cache", _forbid)
    monkeypatch.setattr(pretraining, "build_into_cache", _forbid)
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def weights_copy(tmp_path, monkeypatch):
    """A private copy of the shipped weights that the code reads instead of the package's."""
    copy = tmp_path / "weights"
    shutil.copytree(WEIGHTS_DIR, copy)
    monkeypatch.setattr(shipped, "WEIGHTS_DIR", copy)
    monkeypatch.delenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", raising=False)
    return copy


def _snapshot(directory):
    return {p.relative_to(directory): p.stat().st_mtime_ns for p in sorted(directory.rglob("*"))}


def test_shipped_models_load_instantly_without_training_network_or_writes(no_build_no_network):
    before = _snapshot(WEIGHTS_DIR)
    for name in (
        "offline:tiny-t5-pretrained",
        "offline:tiny-t5",
        "offline:tiny-t5-hindsight",
        "offline:tiny-t5-pretrained-babyai",
    ):
        start = time.perf_counter()
        path = resolve_model_path(name)
        assert time.perf_counter() - start < 5.0  # hashing 0.8 MB, not ten minutes of pretraining
        assert path == str(WEIGHTS_DIR / name.removeprefix("offline:"))
    llm = load_llm(LLMConfig("offline:tiny-t5-pretrained", local_files_only=True))
    assert llm.is_encoder_decoder and llm.model.config.d_model == 64
    assert load_llm(LLMConfig(None)).model.config.d_model == 64  # the default is the shipped tiny T5
    assert not no_build_no_network.exists()  # nothing written to the cache
    assert _snapshot(WEIGHTS_DIR) == before  # nor to the package folder


def test_the_manifest_matches_the_code_recipe_and_lists_safe_files():
    """Fails when a recipe changes (its values, the vocabulary, the random-play data) without
    rebuilding the shipped weights: run the command named in the message and commit the result."""
    manifest = read_manifest()
    assert set(manifest["models"]) == set(SHIPPED_MODELS)
    for name, recipe in CODE_RECIPES.items():
        entry = manifest["models"][name]
        assert entry["recipe"] == recipe, f"offline:{name}'s recipe changed: run `{SHIPPED_MODELS[name]}`"
        assert entry["recipe_version"] == recipe_version(recipe)
        assert entry["command"].startswith(SHIPPED_MODELS[name]) or "--out" in entry["command"]
        for field in ("torch", "transformers", "seed", "files"):
            assert field in entry, field
        assert "model.safetensors" in entry["files"]
        assert all(f.endswith((".safetensors", ".json", ".txt")) for f in entry["files"])  # no pickle
        assert sorted(p.name for p in (WEIGHTS_DIR / name).iterdir()) == sorted(entry["files"])
    for name, (data, environment) in PRETRAINED.items():
        pretrained = manifest["models"][name]
        assert 0.0 < pretrained["transcript_loss"] < 2.0
        assert pretrained["transcripts_sha256"] == transcripts_fingerprint(
            data=data, environment=get_environment(environment)
        ), (
            "the random-play transcripts of pretraining changed (environment, rendering or target format): "
            "the shipped weights are no longer what the recipe builds; bump PRETRAINING_VERSION and run "
            f"`{SHIPPED_MODELS[name]}`"
        )


@pytest.mark.parametrize("name", ["tiny-t5-pretrained", "tiny-t5"])
def test_a_corrupted_shipped_file_is_an_error_naming_it_and_the_rebuild_command(weights_copy, name):
    weights = weights_copy / name / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of a tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(ShippedWeightsError) as error:
        resolve_model_path(f"offline:{name}")
    message = str(error.value)
    assert str(weights) in message and "corrupted" in message and "sha256" in message
    assert SHIPPED_MODELS[name] in message and "TORCHRL_GLAM_SHIPPED_WEIGHTS=0" in message


def test_a_missing_shipped_file_is_an_error_naming_it_and_the_rebuild_command(weights_copy):
    (weights_copy / "tiny-t5-pretrained" / "tokenizer.json").unlink()
    with pytest.raises(
        ShippedWeightsError,
        match=r"(?s)tiny-t5-pretrained/tokenizer\.json of offline:tiny-t5-pretrained "
        r"is missing.*python -m torchrl_glam\.offline\.pretraining --ship",
    ):
        resolve_model_path("offline:tiny-t5-pretrained")
    (weights_copy / "manifest.json").unlink()
    with pytest.raises(ShippedWeightsError, match=r"manifest .*manifest\.json is missing"):
        resolve_model_path("offline:tiny-t5-pretrained")


def test_stale_shipped_weights_are_never_used(weights_copy, monkeypatch, tmp_path):
    """A recipe that differs from the shipped one builds the current recipe into the cache, under
    its own version name, with a warning saying how to update the shipped copy."""
    manifest = json.loads((weights_copy / "manifest.json").read_text())
    manifest["models"]["tiny-t5"]["recipe_version"] = "r0000000000"  # as if the code's recipe had changed
    (weights_copy / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match=r"(?s)built with recipe r0000000000.*not used.*offline\.tiny --ship"):
        path = Path(resolve("offline:tiny-t5").build())
    assert path == tmp_path / "cache" / f"tiny-t5-{recipe_version(tiny_model_recipe('t5'))}"
    assert load_llm(LLMConfig(str(path))).model.config.d_model == 64


def test_shipped_weights_can_be_switched_off(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", "0")
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path))
    assert shipped_model_path("tiny-t5", recipe_version(tiny_model_recipe("t5"))) is None
    assert Path(resolve("offline:tiny-t5").build()).parent == tmp_path


def test_concurrent_builders_build_once_and_the_others_wait_with_a_message(tmp_path, caplog):
    """The ranks of a data-parallel run (or array jobs) asking for an unbuilt model: one builds,
    the others print that they wait and then use its build."""
    final, calls, results = tmp_path / "cache" / "model", [], []

    def build(directory):
        calls.append(directory)
        time.sleep(1.0)  # long enough for the others to find the lock taken
        (directory / "config.json").write_text("{}")
        (directory / "model.safetensors").write_bytes(b"x")

    threads = [threading.Thread(target=lambda: results.append(build_into_cache(final, build))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and results == [final] * 3
    assert caplog.text.count(f"waiting for another process to finish building {final}") == 2


def test_pretraining_says_what_it_builds_and_shows_progress(tmp_path, capfd, monkeypatch):
    source = tiny.build_tiny_model(tmp_path / "init", "t5")
    capfd.readouterr()
    pretraining.pretrain(tmp_path / "a", start_from=source, steps=3, batch_size=4, log_every=2, why="a test")
    err = capfd.readouterr().err  # stderr is not a terminal here: log lines instead of the bar
    first = next(line for line in err.splitlines() if "pretraining" in line)
    assert first.startswith(
        f"pretraining {source} on random-play transcripts into {tmp_path / 'a'} (a test): "
        "3 steps of 4 transcripts, usually about"
    )
    assert "pretraining step 2/3: loss " in err and "s left)" in err and "pretraining step 3/3" in err
    monkeypatch.setenv("RANK", "1")  # off the main process: silent
    pretraining.pretrain(tmp_path / "b", start_from=source, steps=2, batch_size=4, log_every=1)
    assert "pretraining" not in capfd.readouterr().err


def test_a_log_file_gets_progress_at_least_every_30_seconds_and_no_invented_estimate(tmp_path, capfd, monkeypatch):
    source = tiny.build_tiny_model(tmp_path / "init", "t5")
    monkeypatch.setattr(pretraining, "PROGRESS_SECONDS", 0.0)  # every step is "30 s later"
    capfd.readouterr()
    pretraining.pretrain(tmp_path / "a", start_from=source, steps=3, batch_size=4, log_every=100)
    err = capfd.readouterr().err
    assert all(f"pretraining step {step}/3: loss " in err for step in (1, 2, 3))
    # another environment's prompts differ in length: no figure, only its own pace as it goes
    assert "usually about" not in pretraining._progress_message(
        "m", 600, 128, "out", None, environment=get_environment("babyai")
    )
    assert "usually about 10 min" in pretraining._progress_message("m", 600, 128, "out", None)


def test_the_bar_shows_steps_loss_and_time_left_on_a_terminal(tmp_path, monkeypatch):
    """On a terminal the progress is a tqdm bar (steps, loss, time left), not log lines."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    source = tiny.build_tiny_model(tmp_path / "init", "t5")
    pretraining.pretrain(tmp_path / "a", start_from=source, steps=3, batch_size=4, log_every=1)
    out = terminal.getvalue()
    assert "pretraining: 100%" in out and "3/3" in out and "loss=" in out and "<00:00" in out
    assert "pretraining step" not in out  # no log lines under the bar


def test_ranks_in_separate_processes_build_once(tmp_path):
    """The same with processes (what the ranks of a data-parallel run and array jobs are): the lock
    is the kernel's, not the interpreter's. The first rank's build lasts until the second has
    said that it waits (or two minutes)."""
    import subprocess
    import sys

    script = (
        "import sys, time; from pathlib import Path\n"
        "from torchrl_glam.offline.cache import build_into_cache\n"
        "def build(d):\n"
        "    print('BUILDING', flush=True)\n"
        "    deadline = time.time() + 120\n"
        "    while not Path(sys.argv[2]).exists() and time.time() < deadline: time.sleep(0.1)\n"
        "    (d / 'config.json').write_text('{}'); (d / 'model.safetensors').write_bytes(b'x')\n"
        "print(build_into_cache(Path(sys.argv[1]), build), flush=True)\n"
    )
    final, go = tmp_path / "cache" / "model", tmp_path / "go"

    def rank():
        return subprocess.Popen(
            [sys.executable, "-c", script, str(final), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = rank()
    assert first.stdout.readline().strip() == "BUILDING"
    second = rank()
    said = []
    for line in second.stderr:  # until it says it waits (or ends, having built itself: the defect)
        said.append(line)
        if "waiting for another process" in line:
            break
    go.touch()
    (out1, err1), (out2, err2) = first.communicate(timeout=300), second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert out1.strip() == str(final) and out2.strip() == str(final)  # the second never built
    assert f"waiting for another process to finish building {final}" in "".join(said)


def test_the_command_rebuilds_into_the_cache_and_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path))
    pretraining.main(["--steps", "2", "--batch-size", "4"])
    version = recipe_version(pretraining_recipe("t5", steps=2, batch_size=4))
    assert f"wrote the pretrained model to {tmp_path / f'tiny-t5-pretrained-{version}'}" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # --ship writes the package's copy of the default recipe only
        pretraining.main(["--ship", "--steps", "2"])
    assert "--ship builds the default recipe" in capsys.readouterr().err


def test_the_pretrained_model_of_another_environment_is_its_own_shipped_one(no_build_no_network):
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.training.factories import model_of

    cfg = make_config("cpu_babyai")
    assert model_of(cfg) == str(WEIGHTS_DIR / "tiny-t5-pretrained-babyai")  # shipped: nothing built
    assert model_of(make_config("cpu")) == str(WEIGHTS_DIR / "tiny-t5-pretrained")  # Playground-Text's own
    tokenizer = json.loads((WEIGHTS_DIR / "tiny-t5-pretrained-babyai" / "tokenizer.json").read_text())
    assert {"toggle", "forward", "carry"} <= set(tokenizer["model"]["vocab"])


def test_the_textworld_presets_model_is_shipped_so_its_first_run_trains_at_once(no_build_no_network):
    """A new user's `--preset cpu_textworld_coin_collector` loads the coin collector's pretrained tiny
    T5 from the package: nothing is pretrained before training starts (it took ~1 h on first use)."""
    pytest.importorskip("textworld", reason="TextWorld needs the textworld extra")
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.training.factories import model_of

    name = "tiny-t5-pretrained-textworld_coin_collector"
    assert model_of(make_config("cpu_textworld_coin_collector")) == str(WEIGHTS_DIR / name)
    tokenizer = json.loads((WEIGHTS_DIR / name / "tokenizer.json").read_text())
    assert {"coin", "north", "take"} <= set(tokenizer["model"]["vocab"])
    # the same preset on the treasure hunter's games: its own model, shipped too
    hunter = make_config("cpu_textworld_coin_collector", {"env": "textworld_treasure_hunter"})
    assert model_of(hunter) == str(WEIGHTS_DIR / "tiny-t5-pretrained-textworld_treasure_hunter")
    assert not no_build_no_network.exists()


def test_ship_refuses_a_model_that_is_not_shipped_before_it_builds_it(monkeypatch, capsys):
    """The refusal came after an hour's build, which was then lost."""
    monkeypatch.setattr(pretraining, "_pretrain", lambda *args, **kwargs: pytest.fail("built before the refusal"))
    with pytest.raises(SystemExit):
        pretraining.main(["--ship", "--kind", "llama"])
    assert "offline:tiny-llama-pretrained is not one of the shipped models" in capsys.readouterr().err
