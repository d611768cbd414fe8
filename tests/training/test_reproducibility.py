"""The same run twice (same seed, thread count and library versions) logs the same values: every
scalar of every logger file and every evaluation, to the digit. Wall-clock values aside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from data_parallel import run_ranks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sac_glam.py"
ARGS = [
    "--preset",
    "smoke",
    "--no-progress",
    "total_steps=256",
    "eval_every=128",
    "checkpoint_every=128",
    "log_every=16",
    "eval_sets=train,held_out,train_sampled",
]


def logged_values(run: Path) -> dict:
    """Every logged value of a run folder but the clock's: {scalar file: rows, "evaluations": ...}."""
    scalars = run / "logs" / "scalars"
    values = {
        str(path.relative_to(scalars)): path.read_text().splitlines()
        for path in sorted(scalars.rglob("*.csv"))
        if not str(path.relative_to(scalars)).startswith("time")
    }
    evaluations = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    values["evaluations"] = [{k: v for k, v in e.items() if k != "wall_seconds"} for e in evaluations]
    return values


def run_example(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def check_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert len(a) > 10 and len(a["evaluations"]) == 6  # 2 evaluations x 3 sets
    for key in a:
        assert a[key] == b[key], key


@pytest.mark.slow
def test_the_same_run_twice_logs_the_same_values(tmp_path):
    runs = [tmp_path / "a", tmp_path / "b"]
    procs = [run_example([*ARGS, "--run-dir", str(run)]) for run in runs]  # side by side: under load
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    check_same(*(logged_values(run) for run in runs))


@pytest.mark.slow
def test_the_same_data_parallel_run_twice_logs_the_same_values(tmp_path):
    """Two ranks over gloo, twice: rank 0 logs the same values each time."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        run_ranks(EXAMPLE, [*ARGS, "--run-dir", str(run)], timeout=900)
    check_same(*(logged_values(run) for run in runs))
