"""Issue 12, defects 4 and 10: checkpoints never run code, unreadable ones are named (with the
previous good one as a fallback), stale temporaries go, and a resumed run writes no duplicate rows."""

import json
import os
import shutil
import warnings

import pytest
import torch

from torchrl_glam.training import checkpoint as ckpt  # names used as ckpt.X: the old code lacked some

SMOKE = ["--preset", "smoke", "--no-progress"]


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_never_runs_code(tmp_path, sac_example):
    run, marker = tmp_path / "run", tmp_path / "pwned"
    run.mkdir()
    torch.save({"agent": _RunsCode(marker)}, run / "checkpoint.pt")
    try:
        sac_example.main([*SMOKE, "--run-dir", str(run), "--resume"])
    except Exception as err:  # noqa: BLE001 - checked below
        assert "refusing to load" in str(err) and str(run / "checkpoint.pt") in str(err)
    assert not marker.exists(), "loading the checkpoint ran its code"
    with pytest.raises(ckpt.CheckpointError, match="refusing to load"):
        ckpt.load_checkpoint(run)


def test_checkpoint_state_is_plain_data_and_rng_round_trips(tmp_path):
    import random

    import numpy as np

    state = ckpt.rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    ckpt.save_checkpoint({"rng": state}, tmp_path)
    loaded = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # what load_checkpoint does
    ckpt.set_rng_state(loaded["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "text"])
def test_an_unreadable_checkpoint_is_named_and_the_previous_one_is_used(tmp_path, damage):
    ckpt.save_checkpoint({"step": 1, "x": torch.arange(1000)}, tmp_path)
    ckpt.save_checkpoint({"step": 2, "x": torch.arange(1000)}, tmp_path)
    path = tmp_path / "checkpoint.pt"
    data = path.read_bytes()
    damaged = {
        "empty": b"",
        "truncated": data[: len(data) // 2],
        "garbage": b"torn",
        "text": b"hello, not a checkpoint\n",
    }  # a few bytes; a text file put in its place
    path.write_bytes(damaged[damage])
    with pytest.warns(UserWarning, match="checkpoint.pt"):
        state = ckpt.load_checkpoint(tmp_path)
    assert state["step"] == 1
    (tmp_path / "checkpoint.prev.pt").unlink()
    with pytest.raises(Exception, match=f"{path}.*(truncated|corrupted).*new --run-dir"):
        ckpt.load_checkpoint(tmp_path)


def test_stale_temporaries_of_a_killed_writer_are_removed(tmp_path):
    stale = tmp_path / ".checkpoint-abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    ckpt.save_checkpoint({"step": 1}, tmp_path)
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def _rows(run):
    rows = {}
    for path in (run / "logs").rglob("*.csv"):
        steps = [line.split(",")[0] for line in path.read_text().splitlines()]
        rows[str(path.relative_to(run))] = steps
    evaluations = [
        (e["env_steps"], e["set"]) for e in map(json.loads, (run / "evaluations.jsonl").read_text().splitlines())
    ]
    return rows, evaluations


@pytest.mark.slow
def test_a_resumed_run_writes_no_duplicate_rows(tmp_path, sac_example):
    run = tmp_path / "run"
    common = [*SMOKE, "--run-dir", str(run), "log_every=16", "eval_every=48", "checkpoint_every=48"]
    assert sac_example.main([*common, "total_steps=96"]) == 0
    at_96 = tmp_path / "checkpoint_96.pt"
    shutil.copy(run / "checkpoint.pt", at_96)
    assert sac_example.main([*common, "total_steps=160", "--resume"]) == 0
    # a kill after the rows of steps 104..160 were written but before their checkpoint
    shutil.copy(at_96, run / "checkpoint.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert sac_example.main([*common, "total_steps=160", "--resume"]) == 0
    rows, evaluations = _rows(run)
    for name, steps in rows.items():
        assert len(steps) == len(set(steps)) or name.endswith("wall_seconds.csv"), (name, steps)
    assert len(evaluations) == len(set(evaluations)), evaluations
    assert max(int(s) for s in rows["logs/scalars/train/success.csv"]) == 160
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["env_steps"] for e in events if e["event"] == "resume"] == [96, 96]
