"""Issue 69, item 1: a run extended with --resume, once or several times, always resumes from its
newest checkpoint. Every checkpoint a run writes passes its own integrity check in any process
(another hash seed), over many shapes of run: SAC and PPO, one rank and two, before and after the
first update, step counts that are and are not multiples of the batch, with and without changed
fields. (A damaged file is still caught: test_checkpoint_integrity.py.)"""

import json
import subprocess
import sys

import pytest
from reliability_helpers import PYTHON, ROOT, subprocess_env

sys.path.insert(0, str(ROOT / "tests"))
from data_parallel import run_ranks  # noqa: E402

_READ_EVERY_CHECKPOINT = """
import sys
from pathlib import Path
from torchrl_glam.training.checkpoint import read_checkpoint
for path in sys.argv[1:]:
    if Path(path).exists():
        print(path, read_checkpoint(path)["assembler"]["env_steps"])
"""


def _checkpoint_steps(run, hash_seed: int) -> dict[str, int]:
    """The step of each checkpoint file in ``run``, read in a fresh process with another hash seed
    (raises there, and here, when a file fails its integrity check)."""
    paths = [str(run / "checkpoint.pt"), str(run / "checkpoint.prev.pt"), *map(str, sorted(run.glob("rank*/*.pt")))]
    out = subprocess.run(
        [PYTHON, "-c", _READ_EVERY_CHECKPOINT, *paths],
        env=subprocess_env(PYTHONHASHSEED=str(hash_seed)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.stdout.splitlines()}


def _resumed_from(run) -> list[int]:
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return [event["env_steps"] for event in events if event["event"] == "resume"]


# preset, the first run's fields, then each --resume's fields. The two reports first, with
# the default preset, where the partner's memory of sequential goals grows large sets.
SHAPES = {
    "extended_once": ("cpu", ["total_steps=500", "eval_every=250"], [["total_steps=900"]]),
    "extended_twice": ("cpu", ["total_steps=400", "eval_every=200"], [["total_steps=800"], ["total_steps=1000"]]),
    "before_the_first_update_then_odd_steps": (
        "smoke",
        ["total_steps=24", "eval_every=24", "checkpoint_every=24"],
        [["total_steps=203", "checkpoint_every=40"], ["total_steps=301", "critic_lr=0.0002", "eval_every=100"]],
    ),
    "long_with_many_checkpoints": (
        "smoke",
        ["total_steps=1200", "eval_every=400", "checkpoint_every=100", "num_envs=4"],
        [["total_steps=1500", "actor_lr=0.00002"]],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_extended_sac_run_resumes_from_its_newest_checkpoint(tmp_path, sac_example, shape):
    preset, first, resumes = SHAPES[shape]
    run = tmp_path / "run"
    common = ["--preset", preset, "--run-dir", str(run), "--no-progress"]
    assert sac_example.main([*common, *first]) == 0
    for seed, fields in enumerate(resumes, start=1):
        newest = _checkpoint_steps(run, hash_seed=seed)[str(run / "checkpoint.pt")]
        assert sac_example.main([*common, "--resume", *fields]) == 0
        assert _resumed_from(run)[-1] == newest  # not the previous checkpoint
    steps = _checkpoint_steps(run, hash_seed=99)
    assert steps[str(run / "checkpoint.pt")] >= int(resumes[-1][0].split("=")[1])


def test_an_extended_ppo_run_resumes_from_its_newest_checkpoint(tmp_path, ppo_example):
    run = tmp_path / "run"
    common = ["--preset", "smoke", "--run-dir", str(run), "--no-progress"]
    assert ppo_example.main([*common, "total_steps=256", "eval_every=128"]) == 0
    for seed, fields in enumerate([["total_steps=512"], ["total_steps=700", "lr=0.0002"]], start=1):
        newest = _checkpoint_steps(run, hash_seed=seed)[str(run / "checkpoint.pt")]
        assert ppo_example.main([*common, "--resume", *fields]) == 0
        assert _resumed_from(run)[-1] == newest
    _checkpoint_steps(run, hash_seed=7)


@pytest.mark.slow
def test_an_extended_two_rank_run_resumes_from_its_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    common = ["--preset", "smoke", "--run-dir", str(run), "--no-progress", "eval_every=200"]
    script = ROOT / "examples" / "sac_glam.py"
    run_ranks(script, [*common, "total_steps=400"], timeout=600)
    for seed, total in enumerate((800, 1000), start=1):
        newest = _checkpoint_steps(run, hash_seed=seed)[str(run / "checkpoint.pt")]
        run_ranks(script, [*common, "--resume", f"total_steps={total}"], timeout=600)
        assert _resumed_from(run)[-1] == 2 * newest  # a checkpoint counts its rank's steps
    _checkpoint_steps(run, hash_seed=5)
