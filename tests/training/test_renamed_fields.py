"""One name per concept across SAC-GLAM's and PPO-GLAM's configs. A field's name from before 0.2.0
is refused, with the new name, everywhere a config is written down: overrides, config.json, sweep
files, the launcher, a checkpoint's saved config."""

import re
from pathlib import Path

import pytest
from config_names import by_name as _flat
from config_names import study_preset

from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig, make_ppo_config, parse_ppo_overrides
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.launch.launcher import main as launch_main
from torchrl_glam.launch.sweeps import load_sweep
from torchrl_glam.training.config import ConfigError
from torchrl_glam.training.resume import resume_changes

SWEEPS = Path(__file__).resolve().parents[2] / "slurm" / "sweeps"
FORMER_NAMES = {"value_coeff": "algorithm.critic_coeff", "her_loss": "algorithm.ppo_loss"}
OLD_AND_NEW = [("value_coeff", "algorithm.critic_coeff", "0.25"), ("her_loss", "algorithm.ppo_loss", "kl")]


def _refusal(old: str, new: str) -> str:
    new = re.escape(new)
    return rf"config field '{old}' was renamed '{new}' in 0\.2\.0: use {new}"


def test_ppo_fields_have_the_new_names():
    cfg = make_ppo_config("ppo_glam", {"critic_coeff": 0.25, "ppo_loss": "kl", "gae_lambda": 0.9})
    assert (cfg.algorithm.critic_coeff, cfg.algorithm.ppo_loss, cfg.algorithm.gae_lambda) == (0.25, "kl", 0.9)
    assert PPOGLAMConfig.FORMER_NAMES == FORMER_NAMES
    assert not set(_flat(cfg)) & set(FORMER_NAMES)  # config.json is written with the new names only
    # the concepts both algorithms have are spelled alike
    assert {"critic_backprop", "per_alpha", "bootstrap_time_limit"} <= set(_flat(make_config("smoke")))
    assert "bootstrap_time_limit" in _flat(cfg)  # the returns at a time limit: SAC's n-step, PPO's GAE
    assert make_ppo_config(study_preset("cpu_figure2", "cpu_her", "ppo_glam")).algorithm.ppo_loss == "clip"


@pytest.mark.parametrize("old, new, text", OLD_AND_NEW)
def test_an_old_name_as_an_override_is_refused_with_the_new_name(old, new, text):
    with pytest.raises(ConfigError, match=_refusal(old, new)):
        parse_ppo_overrides([f"{old}={text}"])
    with pytest.raises(ConfigError, match=_refusal(old, new)):
        make_ppo_config("smoke", {old: text})
    assert not hasattr(make_ppo_config("smoke"), old)  # nor read as an attribute


@pytest.mark.parametrize("old, new, text", OLD_AND_NEW)
def test_a_saved_config_with_an_old_name_is_refused_by_from_dict(old, new, text):
    saved = _flat(make_ppo_config("smoke"))
    saved[old] = saved.pop(new.split(".")[-1])  # config.json as written before the rename
    with pytest.raises(ConfigError, match=_refusal(old, new)):
        PPOGLAMConfig.from_dict(saved)


def test_a_checkpoint_config_with_an_old_name_is_refused_on_resume():
    cfg = make_ppo_config("smoke")
    saved = _flat(cfg)
    saved["her_loss"] = saved.pop("ppo_loss")
    refusal = r"names her_loss, renamed algorithm\.ppo_loss in 0\.2\.0.*resume it with torchrl_glam 0\.1\.0"
    with pytest.raises(ConfigError, match=refusal):
        resume_changes(saved, cfg)


def test_an_old_name_on_the_command_line_is_one_error_line(tmp_path, capsys):
    from torchrl_glam.algorithms.ppo_glam.train import cli

    run = tmp_path / "run"
    assert cli(["--preset", "smoke", "--run-dir", str(run), "her_loss=kl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: config field 'her_loss' was renamed 'algorithm.ppo_loss'") and "Traceback" not in err
    assert not run.exists()


def test_an_old_name_in_a_sweep_or_a_launch_is_refused_at_submission(tmp_path):
    sweep = tmp_path / "old_names.yaml"
    sweep.write_text("name: old_names\nalgorithm: ppo_glam\npreset: smoke\nseeds: [0]\ngrid:\n  her_loss: [kl]\n")
    argv = ["--algorithm", "ppo_glam", "--runs-root", str(tmp_path / "runs"), "--dry-run"]
    with pytest.raises(ValueError, match=_refusal("her_loss", "algorithm.ppo_loss")):
        launch_main([*argv, "--sweep", str(sweep)])
    with pytest.raises(ConfigError, match=_refusal("value_coeff", "algorithm.critic_coeff")):
        launch_main([*argv, "--preset", "smoke", "--seeds", "0", "value_coeff=0.25"])


def test_committed_sweeps_use_the_new_names(tmp_path):
    for path in sorted(SWEEPS.glob("*.yaml")):
        for run in load_sweep(path, tmp_path):
            assert not set(run.overrides) & set(FORMER_NAMES), (path.name, run.overrides)


@pytest.mark.parametrize("make, preset", [(make_config, "cpu_babyai"), (make_ppo_config, "cpu_babyai")])
def test_a_config_json_without_sections_is_refused_naming_the_version(make, preset):
    # torchrl_glam 0.2 wrote field names, not sections (a name of 0.1.0 among them names its new path)
    cfg = make(preset, {"seed": 3})
    with pytest.raises(ConfigError, match=r"holds its fields in sections .*written by torchrl_glam 0\.2"):
        type(cfg).from_dict(_flat(cfg))
    assert type(cfg).from_dict(cfg.to_dict()) == cfg
