"""Presets and command-line overrides of the PPO-GLAM config (Table 1, App. G variants)."""

import dataclasses
from pathlib import Path

import pytest
from config_names import fields, study_preset

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, make_ppo_config, parse_ppo_overrides
from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides


def test_ppo_glam_preset_is_table_1():
    cfg = make_ppo_config("ppo_glam")
    assert (cfg.env.num_envs, cfg.algorithm.rollout_steps, cfg.transitions_per_update) == (32, 64, 2048)
    assert fields(cfg.algorithm, "epochs minibatch_size entropy_coeff critic_coeff") == (16, 256, 0.01, 0.5)
    assert fields(cfg.algorithm, "gamma gae_lambda lr clip_epsilon max_grad_norm") == (0.99, 0.99, 1e-4, 0.2, 0.5)
    assert fields(cfg.model, "name lora_rank quantization device") == ("google/flan-t5-base", 16, "4bit", "cuda")
    assert (cfg.env.goals, cfg.hindsight.her, cfg.algorithm.ppo_loss) == ("train", False, "clip")
    sac = make_config("sac_glam")  # the same model as the SAC-GLAM run it is compared with
    model = "name lora_rank quantization normalization"
    assert fields(cfg.model, model) == fields(sac.model, model)
    assert set(PPO_PRESETS) >= {"ppo_glam", "cpu", "smoke"}


@pytest.mark.parametrize(
    "ppo_preset, sac_preset",
    [
        ("cpu", "cpu"),
        (study_preset("cpu_figure2", "cpu_her", "ppo_glam"), "cpu"),
        (study_preset("cpu_full", "cpu_full", "ppo_glam"), study_preset("cpu_full", "cpu_full")),
        (study_preset("cpu_full", "cpu_full_her", "ppo_glam"), study_preset("cpu_full", "cpu_full")),
        ("cpu_babyai", "cpu_babyai"),
    ],
    ids=lambda preset: Path(preset).stem,
)
def test_the_comparison_presets_differ_from_sac_glams_by_the_algorithm_only(ppo_preset, sac_preset):
    # the preset files are written out in full; a change to SAC-GLAM's must be made to PPO-GLAM's too
    ppo, sac = make_ppo_config(ppo_preset), make_config(sac_preset)
    assert ppo.env == sac.env and ppo.model == sac.model
    assert dataclasses.replace(ppo.run, run_dir="") == dataclasses.replace(sac.run, run_dir="")
    assert ppo.algorithm.gamma == sac.algorithm.gamma
    assert ppo.algorithm.value_width == sac.algorithm.critic_width


def test_cpu_preset_is_table_1_on_the_simplified_set():
    ppo = make_ppo_config()  # cpu is the default
    assert ppo.model.name == "offline:tiny-t5-pretrained" and ppo.env.goals == "simplified" and not ppo.hindsight.her
    assert ppo.transitions_per_update == 2048 and ppo.algorithm.epochs == 16  # Table 1's schedule
    her = make_ppo_config(study_preset("cpu_figure2", "cpu_her", "ppo_glam"))
    assert (her.hindsight.her, her.algorithm.ppo_loss, her.hindsight.her_filter, her.hindsight.her_centred) == (
        True,
        "clip",
        "aligned",
        False,
    )


def test_babyai_preset_has_glams_ppo_schedule_and_sac_glams_update_compute():
    ppo, sac = make_ppo_config("cpu_babyai"), make_config("cpu_babyai")
    # GLAM's BabyAI-Text tasks: each mission's own time limit (64 or 128 steps), 2 past observations shown
    assert (sac.env.max_steps, sac.env.options["level_time_limits"], sac.env.options["history"]) == (128, True, 2)
    # GLAM's PPO on BabyAI-Text (Carta et al. 2023): 40 steps x 32 environments, 4 epochs of minibatches of 64
    assert (
        ppo.env.num_envs,
        ppo.algorithm.rollout_steps,
        ppo.algorithm.epochs,
        ppo.algorithm.minibatch_size,
        ppo.hindsight.her,
    ) == (32, 40, 4, 64, False)
    # the comparison spends the same scorer updates per environment step on each algorithm
    assert ppo.algorithm.epochs == sac.algorithm.num_updates * sac.algorithm.batch_size / sac.algorithm.update_frequency


def test_overrides_are_typed_by_the_ppo_fields():
    overrides = parse_ppo_overrides(
        ["her=true", "ppo_loss=kl", "kl_target=none", "max_grad_norm=none", "epochs=4", "lr=3e-4"]
    )
    assert overrides == {
        "hindsight.her": True,
        "algorithm.ppo_loss": "kl",
        "algorithm.kl_target": None,
        "algorithm.max_grad_norm": None,
        "algorithm.epochs": 4,
        "algorithm.lr": 3e-4,
    }
    assert make_ppo_config("cpu", overrides).algorithm.epochs == 4
    with pytest.raises(ValueError, match="unknown config field.*epochs"):
        parse_ppo_overrides(["epoch=3"])
    with pytest.raises(ValueError, match="unknown config field"):
        parse_overrides(["epochs=3"])  # SAC-GLAM's fields stay SAC-GLAM's


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"ppo_loss": "ppo"}, "ppo_loss"),
        ({"her_filter": "all"}, "her_filter"),
        ({"ppo_loss": "kl", "her_centred": True}, "her_centred"),
        ({"minibatch_size": 4096}, "minibatch_size"),
        ({"clip_epsilon": 0.0}, "clip_epsilon"),
        ({"her_ratio": 1.0}, "her_ratio"),
        ({"kl_target": -1.0}, "kl_target"),
        ({"gae_lambda": 1.5}, "gae_lambda"),
        ({"goals": "test"}, "goals"),
        ({"epochs": 0}, "epochs"),
        ({"clip_value": 0.0}, "clip_value"),
        ({"her_centred": True, "normalize_advantage": True}, "normalize_advantage"),
    ],
)
def test_bad_values_fail_before_training_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{field}="):
        make_ppo_config("cpu", changes)


def test_unknown_preset_and_field_are_named():
    with pytest.raises(ValueError, match="unknown preset 'sac_glam'"):
        make_ppo_config("sac_glam")
    with pytest.raises(ValueError, match="did you mean.*minibatch_size"):
        make_ppo_config("cpu", {"minibatch": 64})


def test_glams_code_options_reach_the_loss_and_default_to_the_current_behaviour():
    from torchrl_glam.algorithms.ppo_glam.build import make_loss

    default = make_ppo_config("cpu").algorithm
    assert (default.clip_value, default.normalize_advantage, default.bootstrap_time_limit) == (None, False, True)
    cfg = make_ppo_config("cpu", {"clip_value": 0.2, "normalize_advantage": True, "bootstrap_time_limit": False})
    loss = make_loss(cfg)
    assert (loss.clip_value, loss.ppo.normalize_advantage, loss.bootstrap_time_limit) == (0.2, True, False)
