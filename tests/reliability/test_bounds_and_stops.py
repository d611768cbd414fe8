"""Issue 43, item 4: values that would hang or crash a run are refused by config validation,
before the run dir exists; a stop request does not wait for an evaluation (the resumed run does it,
so the logs match an uninterrupted run's)."""

import json

import pytest

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.training.preemption import STOP

SMOKE = ["--preset", "smoke", "--no-progress"]


@pytest.mark.parametrize(
    "override, named",
    [
        ("max_steps=1000000000000", "max_steps"),
        ("seed=-1", "seed"),
        ("seed=99999999999999999999", "seed"),
        ("num_threads=100000", "num_threads"),
        ("num_objects=99", "num_objects"),
        ("total_steps=10000000000000000", "total_steps"),
    ],
)
def test_values_that_hang_or_crash_are_refused_before_the_run_dir_exists(tmp_path, sac_example, override, named):
    run = tmp_path / "run"
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{named}=.*expected"):
        sac_example.main([*SMOKE, "--run-dir", str(run), override])
    assert not run.exists()


@pytest.mark.parametrize(
    "field, value", [("num_envs", 8.5), ("num_envs", True), ("seed", 1.5), ("her", 1), ("eval_sets", 3)]
)  # seed 1.0 is an exact integer: accepted since issue 70 (tests/training/test_config_sections.py)
def test_values_of_the_wrong_type_are_refused(field, value):
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{field}=.*expected"):
        make_config("smoke", {field: value})


def _evaluations(run):
    return [
        {k: v for k, v in json.loads(line).items() if k != "wall_seconds"}
        for line in (run / "evaluations.jsonl").read_text().splitlines()
    ]


def test_a_stop_does_not_wait_for_an_evaluation_and_the_resume_makes_it_up(tmp_path, sac_example):
    schedule = ["total_steps=16", "eval_every=8", "checkpoint_every=8", "log_every=8"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert sac_example.main([*SMOKE, "--run-dir", str(straight), *schedule]) == 0
    STOP.request()  # as a signal would, before the first iteration's end (an evaluation step)
    try:
        assert sac_example.main([*SMOKE, "--run-dir", str(stopped), *schedule]) == 3
    finally:
        STOP.reset()
    assert not (stopped / "evaluations.jsonl").exists()  # stopped without evaluating
    assert sac_example.main([*SMOKE, "--run-dir", str(stopped), "--resume", *schedule]) == 0
    assert _evaluations(stopped) == _evaluations(straight)
