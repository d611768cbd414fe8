"""Issue 12, defects 7 and 9: the launcher validates every run's full config at submission and in
--dry-run, refuses seeds in a sweep's overrides and paths out of the runs root; results survive
torn lines and seeds that stopped early, and say so."""
import csv
import json

import pytest
import yaml

from torchrl_glam.launch.launcher import main as launch_main
from torchrl_glam.launch.results import aggregate


def _sweep(tmp_path, **sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "preset": "smoke", "seeds": [0, 1], **sweep}))
    return ["--sweep", str(path), "--runs-root", str(tmp_path / "runs"), "--dry-run"]


@pytest.mark.parametrize("sweep,match", [
    ({"overrides": {"critic_widht": 64}}, "unknown config field.*critic_widht.*critic_width"),
    ({"grid": {"gamma": [0.9, 1.5]}}, "bad config value gamma=1.5"),
    ({"variants": {"a": {"preset": "nope"}}}, "unknown preset 'nope'"),
    ({"algorithm": "dqn_glam"}, "unknown algorithm 'dqn_glam'"),
    ({"overrides": {"seed": 3}}, "sets 'seed'.*seeds"),
    ({"name": "../../escaped"}, "leaves the runs root"),
    ({"variants": {"b": {"algorithm": "ppo_glam", "critic_lr": 0.1}}}, "unknown config field.*critic_lr"),
])
def test_bad_sweeps_fail_at_dry_run(tmp_path, sweep, match):
    with pytest.raises(ValueError, match=match):
        launch_main(_sweep(tmp_path, **sweep))
    assert not (tmp_path / "escaped").exists()


def test_command_line_runs_are_validated_too(tmp_path):
    root = ["--runs-root", str(tmp_path), "--dry-run", "--preset", "smoke"]
    with pytest.raises(ValueError, match="bad config value max_grad_norm"):
        launch_main([*root, "--seeds", "0-1", "max_grad_norm=-1"])
    with pytest.raises(ValueError, match="--seeds"):
        launch_main([*root, "seed=4"])
    with pytest.raises(ValueError, match="leaves the runs root"):
        launch_main([*root, "--name", "../out"])


def test_yaml_text_numbers_are_typed(tmp_path, capsys):
    assert launch_main(_sweep(tmp_path, overrides={"critic_lr": "1e-3"})) == 0  # YAML reads 1e-3 as text


def _fake_run(root, variant, seed, values, torn=False):
    run = root / variant / f"seed{seed}"
    run.mkdir(parents=True)
    lines = [json.dumps({"env_steps": 100 * (i + 1), "wall_seconds": 10.0 * (i + 1), "set": "train",
                         "success": v}) for i, v in enumerate(values)]
    if torn:
        lines.append('{"env_steps": 900, "wall_sec')
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_torn_lines_are_skipped_with_a_warning_naming_the_file(tmp_path):
    run = _fake_run(tmp_path / "runs", "her", 0, [0.1, 0.2], torn=True)
    _fake_run(tmp_path / "runs", "her", 1, [0.3, 0.4])
    with pytest.warns(UserWarning, match=str(run / "evaluations.jsonl")):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    rows = list(csv.DictReader(open(out / "curves.csv")))
    assert [r["env_steps"] for r in rows] == ["100", "200"]


def test_unequal_seed_lengths_are_reported_not_cut(tmp_path):
    _fake_run(tmp_path / "runs", "her", 0, [0.1, 0.2, 0.3, 0.4])
    _fake_run(tmp_path / "runs", "her", 1, [0.3, 0.4])  # stopped early
    with pytest.warns(UserWarning, match="group 'her'.*unequal lengths"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    rows = [r for r in csv.DictReader(open(out / "curves.csv")) if r["metric"] == "success"]
    assert [(r["env_steps"], r["seeds"]) for r in rows] == [("100", "2"), ("200", "2"), ("300", "1"), ("400", "1")]
    assert float(rows[0]["mean"]) == pytest.approx(0.2)
    summary = list(csv.DictReader(open(out / "summary.csv")))[0]
    assert (summary["final_env_steps"], summary["seeds"], summary["seeds_in_group"]) == ("400", "1", "2")
