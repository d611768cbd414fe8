"""A committed result keeps its runs: the configs and evaluations under experiments/<name>/runs/
are tracked by git, while the training runs a user starts at the top (runs/) stay out of it."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def ignored(path: str) -> bool:
    """Whether git ignores ``path`` (relative to the repository; it need not exist)."""
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert done.returncode in (0, 1), f"git check-ignore failed on {path}"
    return done.returncode == 0


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_results_runs_are_tracked_and_top_level_runs_are_not():
    assert not ignored("experiments/cpu_full/runs/sac_glam_her/seed0/evaluations.jsonl")
    assert not ignored("experiments/autotelic/runs/simplified_goal_given/seed0/config.json")
    assert ignored("runs/sac_glam/checkpoint.pt")
