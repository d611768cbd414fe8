"""Issue 12, defect 7: the launcher validates every run's full config at submission and in
--dry-run, refuses seeds in a sweep's overrides and paths out of the runs root."""

import pytest
import yaml

from torchrl_glam.launch.launcher import main as launch_main


def _sweep(tmp_path, **sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "preset": "smoke", "seeds": [0, 1], **sweep}))
    return ["--sweep", str(path), "--runs-root", str(tmp_path / "runs"), "--dry-run"]


@pytest.mark.parametrize(
    "sweep,match",
    [
        ({"overrides": {"critic_widht": 64}}, "unknown config field.*critic_widht.*critic_width"),
        ({"grid": {"gamma": [0.9, 1.5]}}, "bad config value algorithm.gamma=1.5"),
        ({"variants": {"a": {"preset": "nope"}}}, "unknown preset 'nope'"),
        ({"algorithm": "dqn_glam"}, "unknown algorithm 'dqn_glam'"),
        ({"overrides": {"seed": 3}}, "sets 'seed'.*seeds"),
        ({"name": "../../escaped"}, "leaves the runs root"),
        ({"variants": {"b": {"algorithm": "ppo_glam", "critic_lr": 0.1}}}, "unknown config field.*critic_lr"),
    ],
)
def test_bad_sweeps_fail_at_dry_run(tmp_path, sweep, match):
    with pytest.raises(ValueError, match=match):
        launch_main(_sweep(tmp_path, **sweep))
    assert not (tmp_path / "escaped").exists()


def test_command_line_runs_are_validated_too(tmp_path):
    root = ["--runs-root", str(tmp_path), "--dry-run", "--preset", "smoke"]
    with pytest.raises(ValueError, match="bad config value algorithm.max_grad_norm"):
        launch_main([*root, "--seeds", "0-1", "max_grad_norm=-1"])
    with pytest.raises(ValueError, match="--seeds"):
        launch_main([*root, "seed=4"])
    with pytest.raises(ValueError, match="leaves the runs root"):
        launch_main([*root, "--name", "../out"])


def test_yaml_text_numbers_are_typed(tmp_path, capsys):
    assert launch_main(_sweep(tmp_path, overrides={"critic_lr": "1e-3"})) == 0  # YAML reads 1e-3 as text
