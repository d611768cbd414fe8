"""Typed hyper-parameters of PPO-GLAM (the paper's baseline, Table 1) and of its HER variants (App. G).

``PPOGLAMConfig`` shares the environment, model and run fields and all the machinery (validation
naming the field, nearest-name hints, JSON, typed overrides) with ``SACGLAMConfig`` (``algorithms/sac_glam/config.py``)
(:class:`~torchrl_glam.training.config.GLAMConfig`). Presets:

* ``ppo_glam``: Table 1 with the paper's Flan-T5-base, LoRA and 4-bit, full task set, 32 envs;
* ``cpu``: the offline tiny model on the simplified environment (the default). Its model,
  environment and run-length choices are read from SAC-GLAM's ``cpu`` preset, so that the two
  stay comparable when that preset changes;
* ``cpu_her``: ``cpu`` with hindsight relabeling, the App. G variant the paper found on par with
  PPO (clipped loss, aligned goals, clipping around 1);
* ``cpu_full``, ``cpu_full_her``: the same two on the full task set, read from SAC-GLAM's
  ``cpu_full`` preset (``experiments/cpu_full/``);
* ``smoke``: a few hundred steps, for tests and a first check of an install.

``make_ppo_config("cpu_her", parse_ppo_overrides(["ppo_loss=kl"]))`` builds a validated config.

Field names agree with SAC-GLAM's config and with TorchRL: ``critic_coeff`` (TorchRL's PPO losses;
``value_coeff`` before 0.2.0), ``gae_lambda`` (TorchRL's PPO example), ``ppo_loss`` (``her_loss``
before 0.2.0: it picks the loss with or without HER). The old names are refused with the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from torchrl_glam.algorithms.sac_glam.config import PRESETS as SAC_PRESETS
from torchrl_glam.training.config import GLAMConfig, config_from_preset, parse_overrides


@dataclass
class PPOGLAMConfig(GLAMConfig):
    FORMER_NAMES: ClassVar[dict[str, str]] = {"value_coeff": "critic_coeff", "her_loss": "ppo_loss"}

    value_width: int = 1024  # the value head's two hidden layers (as SAC-GLAM's critic, App. C)
    # --- PPO (Table 1)
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
    # "clip": ClipPPOLoss; "kl": KLPENPPOLoss (App. G.1), with or without HER ("PPO KL", Figure 10)
    ppo_loss: str = "clip"
    # --- HER (App. G)
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
    run_dir: str = "runs/ppo_glam"

    @property
    def transitions_per_update(self) -> int:
        return self.num_envs * self.rollout_steps

    def _checks(self) -> dict[str, bool]:
        return {
            **super()._checks(),
            "value_width": self.value_width >= 1,
            "rollout_steps": self.rollout_steps >= 1,
            "epochs": self.epochs >= 1,
            "minibatch_size": 1 <= self.minibatch_size <= self.transitions_per_update,
            "entropy_coeff": self.entropy_coeff >= 0,
            "critic_coeff": self.critic_coeff >= 0,
            "gamma": 0.0 <= self.gamma <= 1.0,
            "gae_lambda": 0.0 <= self.gae_lambda <= 1.0,
            "lr": self.lr > 0,
            "clip_epsilon": 0.0 < self.clip_epsilon < 1.0,
            "max_grad_norm": self.max_grad_norm is None or self.max_grad_norm > 0,
            "ppo_loss": self.ppo_loss in ("clip", "kl"),
            "her_filter": self.her_filter in ("none", "aligned")
            and (self.her_filter != "aligned" or self._has("subgoal_matrix")),
            "her_centred": not self.her_centred or self.ppo_loss == "clip",
            "her_ratio": 0.0 < self.her_ratio < 1.0,
            "kl_coeff": self.kl_coeff >= 0,
            "kl_target": self.kl_target is None or self.kl_target > 0,
        }

    def _expected(self) -> dict[str, str]:
        return {
            **super()._expected(),
            "minibatch_size": f"between 1 and num_envs x rollout_steps ({self.transitions_per_update})",
            "clip_epsilon": "a number in (0, 1)",
            **dict.fromkeys(["value_width", "rollout_steps", "epochs"], "an integer >= 1"),
            **dict.fromkeys(["entropy_coeff", "critic_coeff", "kl_coeff"], "a number >= 0"),
            **dict.fromkeys(["gamma", "gae_lambda"], "a number in [0, 1]"),
            "lr": "a positive number",
            "max_grad_norm": "a positive number, or none for no clipping",
            "ppo_loss": "'clip' or 'kl'",
            "her_filter": "'none' or 'aligned'" + self._lacks("subgoal_matrix"),
            "her_centred": "false with ppo_loss='kl' (centring moves the clipping range; KL has none)",
            "her_ratio": "a share in (0, 1)",
            "kl_target": "a positive KL, or none for a constant kl_coeff",
        }


#: What the PPO ``cpu`` preset takes from SAC-GLAM's: the model, the environment, the discount, the run's length
#: and schedule (the comparison runs then differ only by the algorithm). Not num_envs: with
#: rollout_steps it makes Table 1's 2048 transitions per update.
_FROM_SAC_CPU = (
    "env",
    "goals",
    "num_objects",
    "goal_types",
    "history",
    "level_time_limits",
    "max_steps",
    "gamma",
    "model",
    "lora_rank",
    "lora_alpha",
    "quantization",
    "dtype",
    "device",
    "normalization",
    "total_steps",
    "eval_every",
    "eval_episodes",
    "eval_sets",
    "log_every",
    "checkpoint_every",
    "loggers",
)


def _from_sac_cpu(preset: str = "cpu") -> dict[str, Any]:
    sac_cpu = SAC_PRESETS[preset]
    shared = {k: sac_cpu[k] for k in _FROM_SAC_CPU if k in sac_cpu}
    if "critic_width" in sac_cpu:  # the value head is as wide as SAC's critic heads
        shared["value_width"] = sac_cpu["critic_width"]
    return shared


PPO_PRESETS: dict[str, dict[str, Any]] = {
    # Table 1 on the full task set with Flan-T5-base, LoRA and 4-bit (App. C), like sac_glam
    "ppo_glam": dict(
        goals="train",
        model="google/flan-t5-base",
        lora_rank=16,
        quantization="4bit",
        device="cuda",
        num_envs=32,
        rollout_steps=64,
        epochs=16,
        minibatch_size=256,
        her=False,
    ),
    # anywhere, no download: SAC-GLAM's cpu choices (see _FROM_SAC_CPU), Table 1's PPO
    "cpu": dict(_from_sac_cpu(), her=False),
    # App. G: clipped PPO on relabeled trajectories with aligned goals (on par with PPO in the paper)
    "cpu_her": dict(_from_sac_cpu(), her=True, ppo_loss="clip", her_filter="aligned", her_centred=False),
    # the same two on the full task set, from SAC-GLAM's cpu_full
    "cpu_full": dict(_from_sac_cpu("cpu_full"), her=False),
    "cpu_full_her": dict(_from_sac_cpu("cpu_full"), her=True, ppo_loss="clip", her_filter="aligned", her_centred=False),
    # BabyAI-Text's MixedTrainLocal, from SAC-GLAM's cpu_babyai, with GLAM's own PPO schedule on
    # BabyAI-Text (Carta et al. 2023: 40 steps x 32 environments, 4 epochs, minibatches of 64): 4
    # sample-updates per environment step, as many as cpu_babyai's SAC-GLAM (Table 1's 16 cost 4x).
    "cpu_babyai": dict(
        _from_sac_cpu("cpu_babyai"), her=False, num_envs=32, rollout_steps=40, epochs=4, minibatch_size=64
    ),
    # a first check of an install, and the end-to-end tests
    "smoke": dict(
        goals="simplified",
        model=None,
        normalization="mean",
        num_envs=8,
        rollout_steps=16,
        epochs=2,
        minibatch_size=64,
        value_width=32,
        total_steps=384,
        eval_every=192,
        eval_episodes=16,
        log_every=64,
        checkpoint_every=192,
    ),
}


def make_ppo_config(preset: str = "cpu", overrides: dict[str, Any] | None = None) -> PPOGLAMConfig:
    """The PPO-GLAM config of a preset with overrides applied, validated."""
    return config_from_preset(PPOGLAMConfig, PPO_PRESETS, preset, overrides)


def parse_ppo_overrides(pairs: list[str]) -> dict[str, Any]:
    """Command-line ``key=value`` pairs -> typed values, by ``PPOGLAMConfig``'s fields."""
    return parse_overrides(pairs, PPOGLAMConfig)
