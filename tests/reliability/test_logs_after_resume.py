"""Issue 43, item 8: a run stopped between two log rows and resumed writes the CSV rows (and
evaluations) of an uninterrupted run, not means over the steps since its checkpoint."""

import json

from torchrl_glam.training.logging import RunLogger
from torchrl_glam.training.preemption import STOP

SCHEDULE = [
    "--preset",
    "smoke",
    "--no-progress",
    "total_steps=128",
    "log_every=32",
    "checkpoint_every=128",
    "eval_every=64",
    "eval_episodes=4",
]


def _logs(run):
    """Every CSV file's rows but the wall-clock ones, and the evaluations without their seconds."""
    rows = {
        str(path.relative_to(run)): path.read_text()
        for path in sorted((run / "logs").rglob("*.csv"))
        if "/time/" not in str(path)
    }
    evaluations = [
        {k: v for k, v in json.loads(line).items() if k != "wall_seconds"}
        for line in (run / "evaluations.jsonl").read_text().splitlines()
    ]
    return rows, evaluations


def test_logs_after_a_resume_are_the_uninterrupted_runs(tmp_path, sac_example, monkeypatch):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert sac_example.main([*SCHEDULE, "--run-dir", str(straight)]) == 0
    log_episodes = RunLogger.episodes

    def stop_at_the_first_episodes(self, episodes):  # step 80: between the rows of steps 64 and 96
        log_episodes(self, episodes)
        STOP.request()

    monkeypatch.setattr(RunLogger, "episodes", stop_at_the_first_episodes)
    try:
        assert sac_example.main([*SCHEDULE, "--run-dir", str(resumed)]) == 3
    finally:
        STOP.reset()
        monkeypatch.undo()
    assert sac_example.main([*SCHEDULE, "--run-dir", str(resumed), "--resume"]) == 0
    expected, got = _logs(straight), _logs(resumed)
    assert sorted(got[0]) == sorted(expected[0])  # no file missing
    assert got == expected
    assert any("train/success" in name for name in got[0]) and any("loss" in name for name in got[0])
    speed = [run / "logs" / "scalars" / "time" / "steps_per_second.csv" for run in (straight, resumed)]
    assert [len(path.read_text().splitlines()) for path in speed] == [3, 3]  # one row per flush but the first
