"""experiments.tools.results aggregates seeds exactly, and groups a run written before a field's
rename with the runs written after it."""

import csv
import json

import pytest
from config_names import by_name

from experiments.tools.results import aggregate, load_run
from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig, make_ppo_config


def _fake_run(root, variant, seed, values):
    run = root / variant / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": seed}))
    lines = [
        json.dumps(
            {
                "env_steps": 100 * (i + 1),
                "wall_seconds": 10.0 * (i + 1),
                "set": "train",
                "success": v,
                "success/grasp": v,
            }
        )
        for i, v in enumerate(values)
    ]
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")


def test_results_aggregate_mean_and_std_over_seeds(tmp_path):
    _fake_run(tmp_path / "runs", "her", 0, [0.2, 0.6])
    _fake_run(tmp_path / "runs", "her", 1, [0.4, 0.8])
    _fake_run(tmp_path / "runs", "no_her", 0, [0.1, 0.1])
    out = aggregate([tmp_path / "runs"], tmp_path / "out")
    for name in ["success_vs_steps.png", "success_vs_seconds.png", "success_by_goal_type.png"]:
        assert (out / name).stat().st_size > 1000
    rows = list(csv.DictReader(open(out / "summary.csv")))
    her = next(r for r in rows if r["group"] == "her" and r["metric"] == "success")
    assert (float(her["mean"]), float(her["std"]), int(her["seeds"])) == (0.7, 0.1, 2)
    assert int(her["final_env_steps"]) == 200 and float(her["final_wall_seconds"]) == 20.0
    curve = [r for r in csv.DictReader(open(out / "curves.csv")) if r["group"] == "her" and r["metric"] == "success"]
    assert [float(r["mean"]) for r in curve] == [0.3, 0.7]
    with pytest.raises(FileNotFoundError, match="no run directories"):
        aggregate([tmp_path / "nothing"], tmp_path / "out2")


# PPO-GLAM's fields renamed in 0.2.0, new name -> old
RENAMED_BACK = {new: old for old, new in PPOGLAMConfig.FORMER_NAMES.items()}


def test_results_group_old_and_new_runs_together(tmp_path):
    cfg = make_ppo_config("smoke")
    for name, config in (
        (
            "old",  # 0.2's config.json: field names, every environment's options at their defaults
            {
                **{"history": 0, "wording": None, "goal_types": None, "level_time_limits": False},
                **{
                    RENAMED_BACK.get(cfg.path_of(name), name) if cfg.has_field(name) else name: value
                    for name, value in by_name(cfg).items()
                },
            },
        ),
        ("new", cfg.to_dict()),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        (tmp_path / name / "evaluations.jsonl").write_text("")
    assert load_run(tmp_path / "old")["config"] == load_run(tmp_path / "new")["config"]


def test_another_environments_goal_types_get_their_own_rows(tmp_path):
    run = tmp_path / "runs" / "her" / "seed0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": 0, "env": "babyai"}))
    lines = [
        json.dumps(
            {
                "env_steps": 100,
                "wall_seconds": 10.0,
                "set": "train",
                "success": 0.2,
                "success/goto": 0.5,
                "success/pickup": 0.1,
            }
        )
    ]
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    out = aggregate([tmp_path / "runs"], tmp_path / "out")
    metrics = {r["metric"] for r in csv.DictReader(open(out / "summary.csv"))}
    assert {"success/goto", "success/pickup"} <= metrics
