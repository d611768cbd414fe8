"""Typed hyper-parameters of PPO-GLAM (the paper's baseline, Table 1) and of its HER variants (App. G).

``PPOGLAMConfig`` shares the ``env``, ``model`` and ``run`` sections and all the machinery
(validation naming the field, typed overrides, presets as files, JSON) with ``SACGLAMConfig``
(:class:`~torchrl_glam.training.config.GLAMConfig`); its own fields are in ``algorithm`` and
``hindsight``. Presets
are YAML files in ``presets/`` beside this module (``python examples/ppo_glam.py --help`` lists
them): ``ppo_glam`` is Table 1 on a GPU; ``cpu`` (the default), ``cpu_babyai`` and
``cpu_textworld_coin_collector`` share their environment, model and run with SAC-GLAM's preset of
the same name. A study's presets are its files (``experiments/<study>/presets/ppo_glam/``).

``make_ppo_config("cpu", parse_ppo_overrides(["her=true", "ppo_loss=kl"]))`` builds a validated config.

Field names agree with SAC-GLAM's config and with TorchRL: ``critic_coeff`` (TorchRL's PPO losses;
``value_coeff`` before 0.2.0), ``gae_lambda`` (TorchRL's PPO example), ``ppo_loss`` (``her_loss``
before 0.2.0: it picks the loss with or without HER). The old names are refused with the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torchrl_glam.training.config import GLAMConfig, Presets, Rule, RunConfig, config_from_preset, lacks, setting
from torchrl_glam.training.config.overrides import parse_overrides
from torchrl_glam.training.config.rules import minimum


@dataclass
class PPOAlgorithmConfig:
    """PPO-GLAM's loss, value head and update schedule (Table 1)."""

    value_width: int = setting(1024, "the value head's two hidden layers (as SAC-GLAM's critic, App. C)")
    rollout_steps: int = setting(64, "steps per environment between updates: 32 x 64 = 2048 transitions")
    epochs: int = setting(16, "passes over each rollout")
    minibatch_size: int = setting(256, "transitions per gradient step")
    entropy_coeff: float = setting(0.01, "the entropy bonus's weight")
    critic_coeff: float = setting(0.5, "the value loss's weight (TorchRL's name)")
    gamma: float = setting(0.99, "the discount")
    gae_lambda: float = setting(0.99, "GAE's lambda")
    lr: float = setting(1e-4, "Adam, on the LLM and the value head")
    clip_epsilon: float = setting(0.2, "the clipped loss's ratio bound")
    max_grad_norm: float | None = setting(0.5, "gradient-norm clipping; None: none")
    clip_value: float | None = setting(
        None,
        "None: the value loss is the squared error to the GAE target (Table 1). A number: GLAM's code's "
        "clipped value loss, V kept within this distance of the collecting policy's value (GLAM: 0.2)",
    )
    normalize_advantage: bool = setting(
        False,
        "standardise the advantages over each minibatch (TorchRL's option; GLAM does not)",
    )
    bootstrap_time_limit: bool = setting(
        True,
        "True: GAE bootstraps with V(s') at a time limit (the prompts do not show the time left, so this is "
        "the exact target). False: a time limit ends the return like a terminal (GLAM's mask = 1 - done)",
    )
    ppo_loss: str = setting(
        "clip",
        '"clip": ClipPPOLoss; "kl": KLPENPPOLoss (App. G.1), with or without HER ("PPO KL", Figure 10)',
    )
    kl_coeff: float = setting(1.0, "beta of the KL penalty (eq. 5; TorchRL's default initial value)")
    kl_target: float | None = setting(
        None,
        "None: beta stays kl_coeff (eq. 5). A number: TorchRL's adaptive rule, at every minibatch beta "
        "doubles when the KL exceeds 1.5 x kl_target and halves when it is below kl_target / 1.5.",
    )


@dataclass
class PPOHindsightConfig:
    """Hindsight relabeling of the rollouts (App. G): its goals, the share of an update it takes
    and the loss's centring."""

    her: bool = setting(
        False,
        "hindsight relabeling (App. G): relabel rollouts with the goals the social partner reported",
    )
    her_filter: str = setting("none", '"none": every reported goal; "aligned": sub-goals of the episode\'s goal')
    her_centred: bool = setting(False, "clip around the first-epoch ratio instead of 1 (clip loss only)")
    her_ratio: float = setting(
        0.5,
        "The share of relabeled transitions in an update's data is capped at her_ratio (App. G gives no "
        "value; 0.5 is SAC-GLAM+HER's batch balance, and bounds the update's cost at twice PPO's).",
    )


@dataclass
class PPOGLAMConfig(GLAMConfig):
    """PPO-GLAM's config: the shared sections (``env``, ``model``, ``run``), ``algorithm`` and
    ``hindsight`` (HER, as in SAC-GLAM's config)."""

    FORMER_NAMES: ClassVar[dict[str, str]] = {"value_coeff": "algorithm.critic_coeff", "her_loss": "algorithm.ppo_loss"}
    ALGORITHM: ClassVar[str] = "ppo_glam"
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ("algorithm.lr",)
    PER_RANK_FIELDS: ClassVar[tuple[str, ...]] = ("env.num_envs", "algorithm.minibatch_size")
    DISCOUNT_FIELD: ClassVar[str] = "algorithm.gamma"
    # the value loss, weighted by critic_coeff: a value and its target within the bound differ by at most twice it
    DIVERGENCE_LOSS_METRICS: ClassVar[dict[str, str]] = {"loss_critic": "algorithm.critic_coeff"}

    algorithm: PPOAlgorithmConfig = field(default_factory=PPOAlgorithmConfig)
    hindsight: PPOHindsightConfig = field(default_factory=PPOHindsightConfig)
    run: RunConfig = field(default_factory=lambda: RunConfig(run_dir="runs/ppo_glam"))

    @property
    def transitions_per_update(self) -> int:
        return self.env.num_envs * self.algorithm.rollout_steps

    RULES: ClassVar[tuple[Rule, ...]] = (
        *GLAMConfig.RULES,
        minimum("algorithm.value_width", 1),
        minimum("algorithm.rollout_steps", 1),
        minimum("algorithm.epochs", 1),
        Rule(
            "algorithm.minibatch_size",
            lambda c, e: 1 <= c.algorithm.minibatch_size <= c.transitions_per_update,
            lambda c, e: f"between 1 and num_envs x rollout_steps ({c.transitions_per_update})",
        ),
        Rule("algorithm.entropy_coeff", lambda c, e: c.algorithm.entropy_coeff >= 0, "a number >= 0"),
        Rule("algorithm.critic_coeff", lambda c, e: c.algorithm.critic_coeff >= 0, "a number >= 0"),
        Rule("algorithm.gamma", lambda c, e: 0.0 <= c.algorithm.gamma <= 1.0, "a number in [0, 1]"),
        Rule("algorithm.gae_lambda", lambda c, e: 0.0 <= c.algorithm.gae_lambda <= 1.0, "a number in [0, 1]"),
        Rule("algorithm.lr", lambda c, e: c.algorithm.lr > 0, "a positive number"),
        Rule("algorithm.clip_epsilon", lambda c, e: 0.0 < c.algorithm.clip_epsilon < 1.0, "a number in (0, 1)"),
        Rule(
            "algorithm.max_grad_norm",
            lambda c, e: c.algorithm.max_grad_norm is None or c.algorithm.max_grad_norm > 0,
            "a positive number, or none for no clipping",
        ),
        Rule(
            "algorithm.clip_value",
            lambda c, e: c.algorithm.clip_value is None or c.algorithm.clip_value > 0,
            "a positive number, or none for no value clipping",
        ),
        Rule(
            "algorithm.normalize_advantage",
            lambda c, e: not (c.algorithm.normalize_advantage and c.hindsight.her_centred),
            "false with her_centred=true (its advantages carry the first-epoch ratio)",
        ),
        Rule("algorithm.ppo_loss", lambda c, e: c.algorithm.ppo_loss in ("clip", "kl"), "'clip' or 'kl'"),
        Rule(
            "hindsight.her_filter",
            lambda c, e: (
                c.hindsight.her_filter in ("none", "aligned")
                and (c.hindsight.her_filter != "aligned" or e.has("subgoal_matrix"))
            ),
            lambda c, e: "'none' or 'aligned'" + lacks(c, e, "subgoal_matrix"),
        ),
        Rule(
            "hindsight.her_centred",
            lambda c, e: not c.hindsight.her_centred or c.algorithm.ppo_loss == "clip",
            "false with ppo_loss='kl' (centring moves the clipping range; KL has none)",
        ),
        Rule("hindsight.her_ratio", lambda c, e: 0.0 < c.hindsight.her_ratio < 1.0, "a share in (0, 1)"),
        Rule("algorithm.kl_coeff", lambda c, e: c.algorithm.kl_coeff >= 0, "a number >= 0"),
        Rule(
            "algorithm.kl_target",
            lambda c, e: c.algorithm.kl_target is None or c.algorithm.kl_target > 0,
            "a positive KL, or none for a constant kl_coeff",
        ),
    )


#: The presets: ``presets/<name>.yaml`` (name -> values by section; see :class:`Presets`). The
#: ``cpu`` family shares its env, model and run sections with SAC-GLAM's presets of the same name
#: (tests/training/test_ppo_config.py checks it), so that a comparison differs by the algorithm only.
PPO_PRESETS = Presets(Path(__file__).with_name("presets"))


def make_ppo_config(preset: str = "cpu", overrides: dict[str, Any] | None = None) -> PPOGLAMConfig:
    """The PPO-GLAM config of a preset with overrides applied, validated."""
    return config_from_preset(PPOGLAMConfig, PPO_PRESETS, preset, overrides)


def parse_ppo_overrides(pairs: list[str]) -> dict[str, Any]:
    """Command-line ``key=value`` pairs -> typed values, by ``PPOGLAMConfig``'s fields."""
    return parse_overrides(pairs, PPOGLAMConfig)
