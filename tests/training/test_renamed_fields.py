"""One name per concept across SAC-GLAM's and PPO-GLAM's configs; the old names stay accepted as
deprecated aliases (a FutureWarning naming the new name) everywhere a config is written down:
overrides, config.json, sweep files, the launcher, a checkpoint's saved config."""

from pathlib import Path

import pytest

from torchrl_glam.launch.launcher import main as launch_main
from torchrl_glam.launch.sweeps import expand_sweep, load_sweep
from torchrl_glam.training.ppo_config import PPOGLAMConfig, make_ppo_config, parse_ppo_overrides
from torchrl_glam.training.resume import resume_changes
from torchrl_glam.training.sac_config import make_config

SWEEPS = Path(__file__).resolve().parents[2] / "slurm" / "sweeps"
RENAMED = {"value_coeff": "critic_coeff", "her_loss": "ppo_loss"}


def test_ppo_fields_have_the_new_names():
    cfg = make_ppo_config("ppo_glam", {"critic_coeff": 0.25, "ppo_loss": "kl", "gae_lambda": 0.9})
    assert (cfg.critic_coeff, cfg.ppo_loss, cfg.gae_lambda) == (0.25, "kl", 0.9)
    assert PPOGLAMConfig.RENAMED == RENAMED
    names = set(cfg.to_dict())
    assert not names & set(RENAMED)  # config.json is written with the new names only
    # the concepts both algorithms have are spelled alike
    assert {"critic_backprop", "per_alpha"} <= set(make_config("smoke").to_dict())
    assert make_ppo_config("cpu_her").ppo_loss == "clip"


@pytest.mark.parametrize("old, new, value", [("value_coeff", "critic_coeff", 0.25), ("her_loss", "ppo_loss", "kl")])
def test_old_names_warn_and_set_the_new_field(old, new, value):
    with pytest.warns(FutureWarning, match=f"'{old}' is now named '{new}'"):
        cfg = make_ppo_config("smoke", {old: value})
    assert getattr(cfg, new) == value
    assert cfg == make_ppo_config("smoke", {new: value})
    with pytest.warns(FutureWarning, match=f"write {new}="):
        assert getattr(cfg, old) == value  # code reading the old attribute keeps working
    with pytest.warns(FutureWarning, match=new):  # command-line overrides, typed as the new field
        assert make_ppo_config("smoke", parse_ppo_overrides([f"{old}={value}"])) == cfg
    with pytest.raises(ValueError, match=f"{new!r} given twice"):
        make_ppo_config("smoke", {old: value, new: value})


def test_a_bad_value_under_an_old_name_is_named_as_written():
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match=r"her_loss='ppo' \(now named ppo_loss\)"):
        make_ppo_config("smoke", {"her_loss": "ppo"})
    with pytest.raises(ValueError, match="bad config value ppo_loss='ppo'"):
        make_ppo_config("smoke", {"ppo_loss": "ppo"})


def test_an_old_config_json_and_checkpoint_config_still_load():
    cfg = make_ppo_config("smoke", {"ppo_loss": "kl"})
    old = {RENAMED_BACK.get(k, k): v for k, v in cfg.to_dict().items()}  # as written before the rename
    assert "her_loss" in old and "ppo_loss" not in old
    with pytest.warns(FutureWarning):
        assert PPOGLAMConfig.from_dict(old) == cfg
    # --resume compares with the checkpoint's saved config: the rename is no change
    assert resume_changes(old, cfg) == {}
    assert resume_changes(old, cfg.replace(total_steps=999)) == {"total_steps": (384, 999)}


RENAMED_BACK = {new: old for old, new in RENAMED.items()}


def test_sweeps_and_launcher_accept_old_names(tmp_path, capsys):
    sweep = {
        "name": "old_names",
        "algorithm": "ppo_glam",
        "preset": "smoke",
        "variants": {"kl": {"her_loss": "kl", "value_coeff": 0.25}},
        "seeds": [0],
    }
    (run,) = expand_sweep(sweep, tmp_path)
    with pytest.warns(FutureWarning, match="ppo_loss"):
        cfg = make_ppo_config(run.preset, run.overrides)
    assert (cfg.ppo_loss, cfg.critic_coeff) == ("kl", 0.25)
    with pytest.warns(FutureWarning, match="critic_coeff"):
        assert (
            launch_main(
                [
                    "--algorithm",
                    "ppo_glam",
                    "--seeds",
                    "0",
                    "--preset",
                    "smoke",
                    "--runs-root",
                    str(tmp_path),
                    "--dry-run",
                    "her_loss=kl",
                    "value_coeff=0.25",
                ]
            )
            == 0
        )
    assert "her_loss=kl" in capsys.readouterr().out  # the job runs what was asked; the script translates


def test_committed_sweeps_use_the_new_names(tmp_path):
    for path in sorted(SWEEPS.glob("*.yaml")):
        for run in load_sweep(path, tmp_path):
            assert not set(run.overrides) & set(RENAMED), (path.name, run.overrides)
