"""The autotelic option of the SAC-GLAM example: config, logs, and exact resume of the goal memory
and the learning-progress statistics through --resume."""
import json

import pytest
import torch

from torchrl_glam.training.sac_config import make_config, parse_overrides

from test_sac_glam import run_straight_and_resumed  # the goal-given exact-resume check


def test_autotelic_config_fields_are_checked():
    assert make_config("cpu").autotelic == "off"
    assert make_config("cpu_autotelic").autotelic == "lp" and make_config("cpu_autotelic_uniform").autotelic == "uniform"
    cpu, autotelic = make_config("cpu").to_dict(), make_config("cpu_autotelic").to_dict()
    assert {k for k in cpu if cpu[k] != autotelic[k]} == {"autotelic"}  # only who picks the goals differs
    for field, value, hint in [("autotelic", "random", "'off', 'uniform' or 'lp'"), ("lp_epsilon", 1.5, "probability"),
                               ("lp_groups", "type,size", "comma-separated"), ("lp_window", 0, "lp_window")]:
        with pytest.raises(ValueError, match=hint):
            make_config("cpu", {field: value})
    assert parse_overrides(["autotelic=uniform", "lp_groups=type,colour"]) == {
        "autotelic": "uniform", "lp_groups": "type,colour"}


@pytest.mark.slow
def test_autotelic_resume_restores_memory_and_statistics_exactly(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke_autotelic")
    final = [torch.load(run / "checkpoint.pt", weights_only=False)["autotelic"]["_extra_state"]
             for run in (straight, resumed)]
    assert final[0]["memory"]["first_seen"].ge(0).sum() > 0  # goals were discovered
    assert torch.equal(final[0]["memory"]["first_seen"], final[1]["memory"]["first_seen"])
    assert final[0]["progress"]["history"] == final[1]["progress"]["history"]
    assert sum(map(len, final[0]["progress"]["history"])) > 0  # attempts were recorded
    assert torch.equal(final[0]["progress"]["attempts"], final[1]["progress"]["attempts"])
    assert torch.equal(final[0]["generator"], final[1]["generator"])
    assert torch.equal(final[0]["neutral"], final[1]["neutral"]) and final[0]["env_steps"] == final[1]["env_steps"]
    # the logs: memory growth, discovered share of the training goals, choices, per-group LP
    scalars = straight / "logs" / "scalars" / "autotelic"
    for name in ["discovered", "discovered_train_fraction", "discovered_task_fraction", "choice/lp", "chosen/grasp", "lp_mean"]:
        assert (scalars / f"{name}.csv").exists(), name
    growth = [float(row.split(",")[1]) for row in (scalars / "discovered.csv").read_text().splitlines()]
    assert growth == sorted(growth) and growth[-1] > 0
    lines = [json.loads(line) for line in (straight / "autotelic.jsonl").read_text().splitlines()]
    assert lines[-1]["discovered"] == growth[-1] and lines[-1]["groups"]
    evaluations = [json.loads(line) for line in (straight / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluations} == {"train", "held_out"}  # evaluated as the goal-given agent
