"""Presets and command-line overrides of the SAC-GLAM config."""

from pathlib import Path

import pytest
import torch
from config_names import fields, study_preset

from experiments.tools.results import load_run
from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig
from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig, make_config, parse_overrides

RESULTS = Path(__file__).resolve().parents[2] / "experiments"


def test_paper_presets_follow_tables_2_and_3():
    table2 = make_config("sac_glam")
    assert fields(table2.algorithm, "update_frequency num_updates batch_size gamma") == (32, 2, 256, 0.99)
    assert fields(table2.algorithm, "actor_lr critic_lr alpha_lr n_step") == (1e-4, 1e-4, 2e-3, 3)
    assert (table2.algorithm.alpha_init, table2.algorithm.target_entropy, table2.hindsight.her) == (0.005, 0.0, False)
    assert (table2.replay.buffer_capacity, table2.env.num_envs, table2.env.goals) == (100_000, 32, "train")
    table3 = make_config("sac_glam_her")
    assert fields(table3.algorithm, "alpha_init target_entropy") == (0.05, 0.01)
    assert fields(table3.hindsight, "her her_ratio") == (True, 0.5)
    assert (
        make_config().model.name == "offline:tiny-t5-pretrained" and make_config().env.goals == "simplified"
    )  # the cpu default
    assert set(PRESETS) >= {"sac_glam", "sac_glam_her", "cpu", "smoke"}


def test_cpu_full_twins_preset_is_the_config_of_the_committed_full_set_result():
    # experiments/cpu_full's headline runs: `--preset experiments/cpu_full/presets/sac_glam/cpu_full_twins.yaml
    # seed=K` must repeat them
    runs = (
        RESULTS / "cpu_full" / "critic" / "runs" / "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform"
    )
    for seed in (0, 1, 2, 3):
        # read as the results tool reads the record's config.json (by field name, torchrl_glam 0.2);
        # fields added since (env, history) take their defaults
        committed = SACGLAMConfig().replace(load_run(runs / f"seed{seed}")["config"]).flat_dict()
        preset = make_config(study_preset("cpu_full", "cpu_full_twins"), {"seed": seed}).flat_dict()
        differ = {k for k in set(committed) | set(preset) if committed.get(k) != preset.get(k)}
        assert differ == {"run.run_dir", "run.loggers"}, differ  # where the run wrote and in which formats


def test_overrides_are_typed():
    overrides = parse_overrides(["batch_size=64", "her=false", "model=none", "gamma=0.9", "loggers=csv,tensorboard"])
    assert overrides == {
        "algorithm.batch_size": 64,
        "hindsight.her": False,
        "model.name": None,
        "algorithm.gamma": 0.9,
        "run.loggers": ["csv", "tensorboard"],
    }
    assert make_config("cpu", overrides).algorithm.batch_size == 64
    assert parse_overrides(["env=babyai", "hindsight.her=false", "env.options.history=0"]) == {
        "env.name": "babyai",
        "hindsight.her": False,
        "env.options.history": 0,
    }
    # without an environment named, an option is kept as given: validation types it
    assert parse_overrides(["env.options.history=0"]) == {"env.options.history": "0"}


@pytest.mark.parametrize(
    "pairs, message",
    [
        (["batch_size=lots"], "algorithm.batch_size='lots'"),
        (["her=maybe"], "hindsight.her='maybe'"),
        (["name=x"], "'name' is ambiguous: say env.name or model.name"),
        (["bach_size=3"], "unknown config field.*batch_size"),
        (["batch_size"], "not key=value"),
    ],
)
def test_bad_overrides_name_the_field(pairs, message):
    with pytest.raises(ValueError, match=message):
        parse_overrides(pairs)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"goals": "test"}, "goals"),
        ({"gamma": 1.5}, "gamma"),
        ({"batch_strategy": "best"}, "batch_strategy"),
        ({"buffer_capacity": 10}, "buffer_capacity"),
        ({"n_step": 0}, "n_step"),
        ({"her_negatives_from": "scenes"}, "her_negatives_from"),
        ({"her": False, "her_twins": True}, "her_twins"),
        ({"critic_loss": "huber"}, "critic_loss"),
        ({"per_beta_end": -1.0}, "per_beta_end"),
        ({"per_eps": 0.0}, "per_eps"),
        ({"per_weight_norm": "shared"}, "per_weight_norm"),
    ],
)
def test_bad_values_fail_before_training_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{field}="):
        make_config("cpu", changes)
    with pytest.raises(ValueError, match="unknown preset"):
        make_config("fast")
    assert SACGLAMConfig().validate().algorithm.warmup_updates == 100


def test_types_uniform_batches_draw_every_goal_type_equally():
    from torchrl_glam.algorithms.sac_glam.build import make_replay
    from torchrl_glam.envs.playground import GOAL_TYPES

    replay = make_replay(make_config(study_preset("cpu_full", "cpu_full"), {"batch_strategy": "types_uniform"}))
    assert replay.names == list(GOAL_TYPES) and replay.weights == [1.0] * 4
    prior = make_replay(make_config(study_preset("cpu_full", "cpu_full"), {"batch_strategy": "prior"}))
    assert prior.weights[GOAL_TYPES.index("grasp")] < 0.02  # the full task set's 136 grasp goals of 8,470


def test_level_time_limits_are_a_babyai_option():
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.training.config import ConfigError

    with pytest.raises(ConfigError, match="level_time_limits"):
        make_config("cpu", {"level_time_limits": True})


@pytest.mark.parametrize("config_class", [SACGLAMConfig, PPOGLAMConfig])
def test_every_refused_value_says_what_is_allowed(config_class):
    # a refusal names the bad value and what the field takes: each rule carries its words, and names
    # a field (or says what it shows of the values)
    cfg = config_class()
    environment = cfg.environment
    assert [rule.path for rule in config_class.RULES if not rule.words(cfg, environment)] == []
    assert [r.path for r in config_class.RULES if r.shown is None and not config_class.has_field(r.path)] == []


@pytest.mark.parametrize(
    "pairs, message",
    [
        (["batch_size=-3"], r"batch_size=-3: expected an integer >= 1"),
        (["batch_size=abc"], r"batch_size='abc': expected an integer$"),
        (["gamma=x"], r"gamma='x': expected a number$"),
        (["nosuchfield=1"], r"unknown config field 'nosuchfield': not a field of SACGLAMConfig \(--help lists them\)$"),
        (["bach_size=3"], r"unknown config field 'bach_size'; did you mean 'batch_size'\?$"),
    ],
)
def test_refusals_explain_the_value_in_words(pairs, message):
    with pytest.raises(ValueError, match=message):
        make_config("cpu", parse_overrides(pairs))


def test_the_paper_options_of_the_losses_and_replay_reach_them_and_default_to_the_current_behaviour():
    from torchrl_glam.algorithms.sac_glam.build import make_loss, make_replay
    from torchrl_glam.algorithms.sac_glam.update import per_beta_at

    default = make_config("cpu")
    assert (default.algorithm.critic_loss, default.replay.per_beta_end) == ("smooth_l1", None)
    assert (default.replay.per_eps, default.replay.per_weight_norm) == (1e-6, "buffer")
    assert [per_beta_at(default, steps) for steps in (0, 10**9)] == [0.4, 0.4]
    cfg = make_config(
        "cpu",
        {"critic_loss": "l2", "per_beta_end": 1.0, "per_eps": 0.01, "per_weight_norm": "part", "total_steps": 1000},
    )
    assert make_loss(cfg, num_actions=5).sac.loss_function == "l2"
    replay = make_replay(cfg)
    assert replay.weight_norm == "part" and replay.buffers[0].sampler.state_dict()["_eps"] == 0.01
    # Schaul et al.: beta linear from its start to 1 at the end of the run
    assert [per_beta_at(cfg, steps) for steps in (0, 500, 1000, 2000)] == pytest.approx([0.4, 0.7, 1.0, 1.0])


def test_her_goals_training_relabels_only_with_the_training_goal_set():
    from torchrl_glam.algorithms.sac_glam.build import make_episode_processing

    cfg = make_config("smoke", {"hindsight.her": True, "hindsight.her_goals": "training"})
    her, _, _ = make_episode_processing(cfg)
    training = torch.as_tensor(cfg.environment.catalogue.goal_set(cfg.env.goals), dtype=torch.long)
    assert torch.equal(her.relabel_goals, training)
    assert make_episode_processing(make_config("smoke", {"hindsight.her": True}))[0].relabel_goals is None  # the paper
    expected = r"hindsight.her_goals='rooms'.*expected 'reported', 'training' or 'training_types'"
    with pytest.raises(ValueError, match=expected):
        make_config("smoke", {"hindsight.her_goals": "rooms"})


def test_her_goals_training_types_relabels_with_every_goal_of_the_training_sets_types():
    from torchrl_glam.algorithms.sac_glam.build import make_episode_processing

    cfg = make_config("smoke", {"hindsight.her": True, "hindsight.her_goals": "training_types"})
    catalogue = cfg.environment.catalogue
    kept = set(make_episode_processing(cfg)[0].relabel_goals.tolist())
    training = set(catalogue.goal_set(cfg.env.goals).tolist())
    types = {int(catalogue.goal_type[g]) for g in training}
    assert kept == {g for g in range(len(catalogue)) if int(catalogue.goal_type[g]) in types}
    assert training < kept  # goals outside the training set, of its types too


def test_ratio_batches_without_her_are_refused_and_the_default_follows_her():
    """Issue 86: ``batch_strategy=ratio`` (a share of each batch relabeled) with ``her=false`` silently
    drew uniform batches; it is refused, and the default is the paper's ratio with HER, uniform
    without. A 0.3.0 config.json of a run without HER, which saved "ratio", is read as the default."""
    from torchrl_glam.algorithms.sac_glam.build import make_replay
    from torchrl_glam.training.config import ConfigError

    with pytest.raises(ConfigError, match=r"replay.batch_strategy='ratio'.*without HER"):
        make_config("smoke", {"her": False, "batch_strategy": "ratio"})
    assert make_replay(make_config("smoke")).strategy == "ratio"
    assert make_replay(make_config("smoke", {"her": False})).strategy == "uniform"
    saved = make_config("smoke", {"her": False}).to_dict()
    saved["replay"]["batch_strategy"] = "ratio"  # what 0.3.0 wrote for every run
    assert SACGLAMConfig.from_dict(saved).replay.batch_strategy is None
