"""Typed hyper-parameters of PPO-GLAM (the paper's baseline, Table 1) and of its HER variants (App. G).

``PPOGLAMConfig`` shares the ``env``, ``model`` and ``run`` sections and all the machinery
(validation naming the field, typed overrides, presets as files, JSON) with ``SACGLAMConfig``
(:class:`~torchrl_glam.training.config.GLAMConfig`); its own fields are in ``algorithm``. Presets
are YAML files in ``presets/`` beside this module (``python examples/ppo_glam.py --help`` lists
them): ``ppo_glam`` is Table 1 on a GPU; ``cpu`` (the default), ``cpu_her`` (App. G's clipped loss
with aligned goals), ``cpu_full``, ``cpu_full_her`` and ``cpu_babyai`` share their environment,
model and run with SAC-GLAM's preset of the same family.

``make_ppo_config("cpu_her", parse_ppo_overrides(["ppo_loss=kl"]))`` builds a validated config.

Field names agree with SAC-GLAM's config and with TorchRL: ``critic_coeff`` (TorchRL's PPO losses;
``value_coeff`` before 0.2.0), ``gae_lambda`` (TorchRL's PPO example), ``ppo_loss`` (``her_loss``
before 0.2.0: it picks the loss with or without HER). The old names are refused with the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torchrl_glam.training.config import GLAMConfig, Presets, RunConfig, config_from_preset, parse_overrides


@dataclass
class PPOAlgorithmConfig:
    """PPO-GLAM's loss, value head and update schedule (Table 1), and its HER variants (App. G)."""

    value_width: int = 1024  # the value head's two hidden layers (as SAC-GLAM's critic, App. C)
    rollout_steps: int = 64  # steps per environment between updates: 32 x 64 = 2048 transitions
    epochs: int = 16  # passes over each rollout
    minibatch_size: int = 256  # transitions per gradient step
    entropy_coeff: float = 0.01  # the entropy bonus's weight
    critic_coeff: float = 0.5  # the value loss's weight (TorchRL's name)
    gamma: float = 0.99  # the discount
    gae_lambda: float = 0.99  # GAE's lambda
    lr: float = 1e-4  # Adam, on the LLM and the value head
    clip_epsilon: float = 0.2  # the clipped loss's ratio bound
    max_grad_norm: float | None = 0.5  # gradient-norm clipping; None: none
    # None: the value loss is the squared error to the GAE target (Table 1). A number: GLAM's code's
    # clipped value loss, V kept within this distance of the collecting policy's value (GLAM: 0.2)
    clip_value: float | None = None
    # standardise the advantages over each minibatch (TorchRL's option; GLAM does not)
    normalize_advantage: bool = False
    # True: GAE bootstraps with V(s') at a time limit (the prompts do not show the time left, so this
    # is the exact target). False: a time limit ends the return like a terminal (GLAM's mask = 1 - done)
    bootstrap_time_limit: bool = True
    # "clip": ClipPPOLoss; "kl": KLPENPPOLoss (App. G.1), with or without HER ("PPO KL", Figure 10)
    ppo_loss: str = "clip"
    # hindsight relabeling (App. G):
    her: bool = False  # relabel rollouts with the goals the social partner reported
    her_filter: str = "none"  # "none": every reported goal; "aligned": sub-goals of the episode's goal
    her_centred: bool = False  # clip around the first-epoch ratio instead of 1 (clip loss only)
    # The share of relabeled transitions in an update's data is capped at her_ratio (App. G gives no
    # value; 0.5 is SAC-GLAM+HER's batch balance, and bounds the update's cost at twice PPO's).
    her_ratio: float = 0.5
    kl_coeff: float = 1.0  # beta of the KL penalty (eq. 5; TorchRL's default initial value)
    # None: beta stays kl_coeff (eq. 5). A number: TorchRL's adaptive rule, at every minibatch beta
    # doubles when the KL exceeds 1.5 x kl_target and halves when it is below kl_target / 1.5.
    kl_target: float | None = None


@dataclass
class PPOGLAMConfig(GLAMConfig):
    """PPO-GLAM's config: the shared sections (``env``, ``model``, ``run``) and ``algorithm``."""

    FORMER_NAMES: ClassVar[dict[str, str]] = {"value_coeff": "algorithm.critic_coeff", "her_loss": "algorithm.ppo_loss"}
    ALGORITHM: ClassVar[str] = "ppo_glam"
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ("algorithm.lr",)
    PER_RANK_FIELDS: ClassVar[tuple[str, ...]] = ("env.num_envs", "algorithm.minibatch_size")
    DISCOUNT_FIELD: ClassVar[str] = "algorithm.gamma"
    # the value loss, weighted by critic_coeff: a value and its target within the bound differ by at most twice it
    DIVERGENCE_LOSS_METRICS: ClassVar[dict[str, str]] = {"loss_critic": "algorithm.critic_coeff"}

    algorithm: PPOAlgorithmConfig = field(default_factory=PPOAlgorithmConfig)
    run: RunConfig = field(default_factory=lambda: RunConfig(run_dir="runs/ppo_glam"))

    @property
    def transitions_per_update(self) -> int:
        return self.env.num_envs * self.algorithm.rollout_steps

    def _checks(self) -> dict[str, bool]:
        a = self.algorithm
        return {
            **super()._checks(),
            "algorithm.value_width": a.value_width >= 1,
            "algorithm.rollout_steps": a.rollout_steps >= 1,
            "algorithm.epochs": a.epochs >= 1,
            "algorithm.minibatch_size": 1 <= a.minibatch_size <= self.transitions_per_update,
            "algorithm.entropy_coeff": a.entropy_coeff >= 0,
            "algorithm.critic_coeff": a.critic_coeff >= 0,
            "algorithm.gamma": 0.0 <= a.gamma <= 1.0,
            "algorithm.gae_lambda": 0.0 <= a.gae_lambda <= 1.0,
            "algorithm.lr": a.lr > 0,
            "algorithm.clip_epsilon": 0.0 < a.clip_epsilon < 1.0,
            "algorithm.max_grad_norm": a.max_grad_norm is None or a.max_grad_norm > 0,
            "algorithm.clip_value": a.clip_value is None or a.clip_value > 0,
            "algorithm.normalize_advantage": not (a.normalize_advantage and a.her_centred),
            "algorithm.ppo_loss": a.ppo_loss in ("clip", "kl"),
            "algorithm.her_filter": a.her_filter in ("none", "aligned")
            and (a.her_filter != "aligned" or self._has("subgoal_matrix")),
            "algorithm.her_centred": not a.her_centred or a.ppo_loss == "clip",
            "algorithm.her_ratio": 0.0 < a.her_ratio < 1.0,
            "algorithm.kl_coeff": a.kl_coeff >= 0,
            "algorithm.kl_target": a.kl_target is None or a.kl_target > 0,
        }

    def _expected(self) -> dict[str, str]:
        return {
            **super()._expected(),
            "algorithm.minibatch_size": f"between 1 and num_envs x rollout_steps ({self.transitions_per_update})",
            "algorithm.clip_epsilon": "a number in (0, 1)",
            **dict.fromkeys(
                ["algorithm.value_width", "algorithm.rollout_steps", "algorithm.epochs"], "an integer >= 1"
            ),
            **dict.fromkeys(
                ["algorithm.entropy_coeff", "algorithm.critic_coeff", "algorithm.kl_coeff"], "a number >= 0"
            ),
            **dict.fromkeys(["algorithm.gamma", "algorithm.gae_lambda"], "a number in [0, 1]"),
            "algorithm.lr": "a positive number",
            "algorithm.max_grad_norm": "a positive number, or none for no clipping",
            "algorithm.clip_value": "a positive number, or none for no value clipping",
            "algorithm.normalize_advantage": "false with her_centred=true (its advantages carry the first-epoch ratio)",
            "algorithm.ppo_loss": "'clip' or 'kl'",
            "algorithm.her_filter": "'none' or 'aligned'" + self._lacks("subgoal_matrix"),
            "algorithm.her_centred": "false with ppo_loss='kl' (centring moves the clipping range; KL has none)",
            "algorithm.her_ratio": "a share in (0, 1)",
            "algorithm.kl_target": "a positive KL, or none for a constant kl_coeff",
        }


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
