"""The autotelic option of the SAC-GLAM example: config, logs, and exact resume of the goal memory
and the learning-progress statistics through --resume."""

import json

import pytest
import torch
from config_names import study_preset
from test_sac_glam import run_straight_and_resumed  # the goal-given exact-resume check

from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides
from torchrl_glam.envs import get_environment
from torchrl_glam.training.checkpoint import read_checkpoint

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def test_autotelic_config_fields_are_checked():
    assert make_config("cpu").algorithm.autotelic == "off"
    assert (
        make_config(study_preset("autotelic", "cpu_autotelic")).algorithm.autotelic == "lp"
        and make_config(study_preset("autotelic", "cpu_autotelic_uniform")).algorithm.autotelic == "uniform"
    )
    cpu, autotelic = make_config("cpu").flat_dict(), make_config(study_preset("autotelic", "cpu_autotelic")).flat_dict()
    assert {k for k in cpu if cpu[k] != autotelic[k]} == {"algorithm.autotelic"}  # only who picks the goals differs
    for field, value, hint in [
        ("autotelic", "random", "'off', 'uniform' or 'lp'"),
        ("lp_epsilon", 1.5, "probability"),
        ("lp_groups", "type,size", "comma-separated"),
        ("lp_window", 0, "lp_window"),
    ]:
        with pytest.raises(ValueError, match=hint):
            make_config("cpu", {field: value})
    assert parse_overrides(["autotelic=uniform", "lp_groups=type,colour"]) == {
        "algorithm.autotelic": "uniform",
        "algorithm.lp_groups": "type,colour",
    }


@pytest.mark.slow
def test_autotelic_resume_restores_memory_and_statistics_exactly(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, study_preset("autotelic", "smoke_autotelic"))
    final = [read_checkpoint(run / "checkpoint.pt")["autotelic"]["_extra_state"] for run in (straight, resumed)]
    assert final[0]["memory"]["first_seen"].ge(0).sum() > 0  # goals were discovered
    assert torch.equal(final[0]["memory"]["first_seen"], final[1]["memory"]["first_seen"])
    assert final[0]["progress"]["history"] == final[1]["progress"]["history"]
    assert sum(map(len, final[0]["progress"]["history"])) > 0  # attempts were recorded
    assert torch.equal(final[0]["progress"]["attempts"], final[1]["progress"]["attempts"])
    assert torch.equal(final[0]["generator"], final[1]["generator"])
    assert torch.equal(final[0]["neutral"], final[1]["neutral"]) and final[0]["env_steps"] == final[1]["env_steps"]
    # the logs: memory growth, discovered share of the training goals, choices, per-group LP
    scalars = straight / "logs" / "scalars" / "autotelic"
    for name in [
        "discovered",
        "discovered_train_fraction",
        "discovered_task_fraction",
        "choice/lp",
        "chosen/grasp",
        "lp_mean",
    ]:
        assert (scalars / f"{name}.csv").exists(), name
    growth = [float(row.split(",")[1]) for row in (scalars / "discovered.csv").read_text().splitlines()]
    assert growth == sorted(growth) and growth[-1] > 0
    lines = [json.loads(line) for line in (straight / "autotelic.jsonl").read_text().splitlines()]
    assert lines[-1]["discovered"] == growth[-1] and lines[-1]["groups"]
    # the log's first-report steps are the memory's, straight or resumed (the report's exact curve)
    from experiments.tools.discovery import first_seen_from_log
    from torchrl_glam.envs.playground import GoalCatalogue

    for run in (straight, resumed):
        first_seen, until = first_seen_from_log(run / "autotelic.jsonl", GoalCatalogue.default())
        assert until == 192 and (first_seen == final[0]["memory"]["first_seen"].numpy()).all()
    evaluations = [json.loads(line) for line in (straight / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluations} == {"train", "held_out"}  # evaluated as the goal-given agent


def test_the_log_lists_each_discovered_goal_once_with_its_first_report_step(tmp_path):
    from torchrl_glam.data.autotelic import AutotelicGoals
    from torchrl_glam.envs.playground import GoalCatalogue
    from torchrl_glam.training.logging import RunLogger

    catalogue = GoalCatalogue.default()
    a, b, c, d = (int(i) for i in catalogue.goal_set("simplified")[:4])
    cfg = make_config(study_preset("autotelic", "smoke_autotelic"), {"run_dir": str(tmp_path)})
    goals = AutotelicGoals(num_envs=2, num_objects=3, task_set="simplified", environment=PLAYGROUND)
    logger = RunLogger(cfg)
    goals.memory.add(torch.tensor([[a, b], [c, -1]]), torch.tensor([2, 1]), torch.tensor([7, 8]))
    logger.autotelic(goals, 32)
    goals.memory.add(torch.tensor([[a, d], [-1, -1]]), torch.tensor([2, 0]), 40)  # a again: not new
    logger.autotelic(goals, 64)
    RunLogger(cfg).autotelic(goals, 96)  # a resumed run's logger: its first line lists the whole memory
    lines = [json.loads(line) for line in (tmp_path / "autotelic.jsonl").read_text().splitlines()]
    names = {i: catalogue.goals[i] for i in (a, b, c, d)}
    assert [line["new"] for line in lines] == [
        {names[a]: 7, names[b]: 7, names[c]: 8},
        {names[d]: 40},
        {names[a]: 7, names[b]: 7, names[c]: 8, names[d]: 40},
    ]
    assert [line["discovered"] for line in lines] == [3, 4, 4]
    assert lines[1]["discovered_train_fraction"] == pytest.approx(4 / 8470)
