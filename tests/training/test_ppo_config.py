"""Presets and command-line overrides of the PPO-GLAM config (Table 1, App. G variants)."""

import pytest

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, make_ppo_config, parse_ppo_overrides
from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides


def test_ppo_glam_preset_is_table_1():
    cfg = make_ppo_config("ppo_glam")
    assert (cfg.num_envs, cfg.rollout_steps, cfg.transitions_per_update) == (32, 64, 2048)
    assert (cfg.epochs, cfg.minibatch_size, cfg.entropy_coeff, cfg.critic_coeff) == (16, 256, 0.01, 0.5)
    assert (cfg.gamma, cfg.gae_lambda, cfg.lr, cfg.clip_epsilon, cfg.max_grad_norm) == (0.99, 0.99, 1e-4, 0.2, 0.5)
    assert (cfg.model, cfg.lora_rank, cfg.quantization, cfg.device) == ("google/flan-t5-base", 16, "4bit", "cuda")
    assert (cfg.goals, cfg.her, cfg.ppo_loss) == ("train", False, "clip")
    sac = make_config("sac_glam")  # the same model as the SAC-GLAM run it is compared with
    assert (cfg.model, cfg.lora_rank, cfg.quantization, cfg.normalization) == (
        sac.model,
        sac.lora_rank,
        sac.quantization,
        sac.normalization,
    )
    assert set(PPO_PRESETS) >= {"ppo_glam", "cpu", "cpu_her", "smoke"}


def test_cpu_preset_follows_the_sac_cpu_preset():
    ppo, sac = make_ppo_config(), make_config("cpu")  # cpu is the default
    for name in ("goals", "model", "normalization", "gamma", "num_objects", "max_steps", "total_steps", "eval_every"):
        assert getattr(ppo, name) == getattr(sac, name), name
    assert ppo.value_width == sac.critic_width
    assert ppo.model == "offline:tiny-t5-pretrained" and ppo.goals == "simplified" and not ppo.her
    assert ppo.transitions_per_update == 2048 and ppo.epochs == 16  # Table 1's schedule
    her = make_ppo_config("cpu_her")
    assert (her.her, her.ppo_loss, her.her_filter, her.her_centred) == (True, "clip", "aligned", False)


def test_babyai_preset_has_glams_ppo_schedule_and_sac_glams_update_compute():
    ppo, sac = make_ppo_config("cpu_babyai"), make_config("cpu_babyai")
    for name in (
        "env",
        "goals",
        "model",
        "max_steps",
        "level_time_limits",
        "history",
        "gamma",
        "total_steps",
        "eval_every",
        "eval_sets",
    ):
        assert getattr(ppo, name) == getattr(sac, name), name
    # GLAM's BabyAI-Text tasks: each mission's own time limit (64 or 128 steps), 2 past observations shown
    assert (sac.max_steps, sac.level_time_limits, sac.history) == (128, True, 2)
    # GLAM's PPO on BabyAI-Text (Carta et al. 2023): 40 steps x 32 environments, 4 epochs of minibatches of 64
    assert (ppo.num_envs, ppo.rollout_steps, ppo.epochs, ppo.minibatch_size, ppo.her) == (32, 40, 4, 64, False)
    # the comparison spends the same scorer updates per environment step on each algorithm
    assert ppo.epochs == sac.num_updates * sac.batch_size / sac.update_frequency


def test_overrides_are_typed_by_the_ppo_fields():
    overrides = parse_ppo_overrides(
        ["her=true", "ppo_loss=kl", "kl_target=none", "max_grad_norm=none", "epochs=4", "lr=3e-4"]
    )
    assert overrides == {
        "her": True,
        "ppo_loss": "kl",
        "kl_target": None,
        "max_grad_norm": None,
        "epochs": 4,
        "lr": 3e-4,
    }
    assert make_ppo_config("cpu", overrides).epochs == 4
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
    ],
)
def test_bad_values_fail_before_training_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=f"bad config value {field}="):
        make_ppo_config("cpu", changes)


def test_unknown_preset_and_field_are_named():
    with pytest.raises(ValueError, match="unknown preset 'sac_glam'"):
        make_ppo_config("sac_glam")
    with pytest.raises(ValueError, match="did you mean.*minibatch_size"):
        make_ppo_config("cpu", {"minibatch": 64})
