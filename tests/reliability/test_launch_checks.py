"""Issue 43, item 5: --dry-run refuses what the jobs would refuse (wrong types, two runs in one run
dir) and what would exhaust memory or Slurm's array limit, before expanding anything."""

import os

import pytest
import yaml

from torchrl_glam.launch.launcher import main as launch_main


def _sweep(tmp_path, text=None, **sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(text if text is not None else yaml.safe_dump({"name": "s", "preset": "smoke", **sweep}))
    return ["--sweep", str(path), "--runs-root", str(tmp_path / "runs"), "--dry-run"]


@pytest.mark.parametrize(
    "value, match",
    [(8.5, r"num_envs=8.5: expected an integer, got float"), (True, r"num_envs=True: expected an integer, got bool")],
)
def test_a_value_of_the_wrong_type_fails_at_dry_run(tmp_path, value, match):
    with pytest.raises(ValueError, match=match):
        launch_main(_sweep(tmp_path, overrides={"num_envs": value}))


def test_two_runs_in_one_run_dir_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"seed\(s\) \[0\] more than once"):
        launch_main(["--runs-root", str(tmp_path), "--dry-run", "--preset", "smoke", "--seeds", "0,0,00"])
    with pytest.raises(ValueError, match=r"two runs write to .*actor_lr-0.0001.*list each value once"):
        launch_main(_sweep(tmp_path, grid={"actor_lr": [0.0001, "0.0001", 1.0e-4]}))


def test_huge_grids_and_seed_ranges_are_refused_before_expanding(tmp_path):
    grid = {name: list(range(1000)) for name in ("critic_width", "batch_size", "n_step")}  # 10**9 runs
    with pytest.raises(ValueError, match=r"1000000000 runs .*more than 1001"):
        launch_main(_sweep(tmp_path, grid=grid))
    with pytest.raises(ValueError, match=r"more than 1001 runs"):
        launch_main(["--runs-root", str(tmp_path), "--dry-run", "--preset", "smoke", "--seeds", "0-100000000"])


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "name: s\npreset: smoke\noverrides:\n" + "".join(f"  {line}\n" for line in levels)
    with pytest.raises(ValueError, match="expands to more than 100000 values"):
        launch_main(_sweep(tmp_path, text=text))


def test_slurm_max_array_size_is_checked_when_scontrol_answers(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'MaxArraySize            = 4'\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    root = ["--runs-root", str(tmp_path / "runs"), "--dry-run", "--preset", "smoke"]
    with pytest.raises(ValueError, match="more than 4 runs"):
        launch_main([*root, "--seeds", "0-4"])
    assert launch_main([*root, "--seeds", "0-3"]) == 0
