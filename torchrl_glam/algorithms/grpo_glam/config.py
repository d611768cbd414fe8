"""Typed hyper-parameters of GRPO-GLAM: group-relative advantages (GRPO) and GiGPO's step-level
groups, on GLAM's candidate-scoring policy with TorchRL's clipped PPO objective and no critic.

``GRPOGLAMConfig`` shares the ``env``, ``model`` and ``run`` sections and the machinery (validation
naming the field, typed overrides, presets as files, JSON) with the other algorithms' configs
(:class:`~torchrl_glam.training.config.GLAMConfig`); its own fields are in ``algorithm``. Presets are
YAML files in ``presets/`` beside this module: ``cpu`` (the default), ``cpu_babyai`` and
``cpu_textworld_coin_collector`` share their environment, model and run with PPO-GLAM's preset of the
same name, and the policy update's schedule (learning rate, epochs, minibatches, clipping, entropy),
so that a comparison differs by the advantage only.

``make_grpo_config("cpu", parse_grpo_overrides(["step_level=true"]))`` builds a validated config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torchrl_glam.training.config import GLAMConfig, Presets, Rule, RunConfig, config_from_preset, setting
from torchrl_glam.training.config.overrides import parse_overrides
from torchrl_glam.training.config.rules import minimum


@dataclass
class GRPOAlgorithmConfig:
    """GRPO-GLAM's groups, advantages, loss and update schedule."""

    group_size: int = setting(8, "G: episodes per group, played one after another from one start (GiGPO: 8)")
    groups_per_update: int = setting(
        32,
        "update once this many groups are complete (~2,000 transitions on Playground-Text, PPO-GLAM's 2048)",
    )
    step_level: bool = setting(
        False,
        "GiGPO: add the step-level advantage of steps whose compact states are identical across a group's episodes",
    )
    step_weight: float = setting(1.0, "omega, the step-level advantage's weight (GiGPO: 1)")
    gamma: float = setting(0.95, "the discount of the step-level returns-to-go (GiGPO: 0.95)")
    epochs: int = setting(16, "passes over each update's data (PPO-GLAM's Table 1)")
    minibatch_size: int = setting(256, "transitions per gradient step")
    lr: float = setting(1e-4, "Adam, on the LLM")
    clip_epsilon: float = setting(0.2, "the clipped loss's ratio bound")
    entropy_coeff: float = setting(0.01, "the entropy bonus's weight (PPO-GLAM's; GRPO's papers use 0)")
    kl_coeff: float = setting(
        0.0,
        "beta of the exact KL to the initial policy (GRPO: 0.04, GiGPO: 0.01); 0: none, and no copy of the "
        "initial weights",
    )
    max_grad_norm: float | None = setting(0.5, "gradient-norm clipping; None: none")
    eps: float = setting(1e-6, "added to the groups' standard deviations")


@dataclass
class GRPOGLAMConfig(GLAMConfig):
    """GRPO-GLAM's config: the shared sections (``env``, ``model``, ``run``) and ``algorithm``."""

    ALGORITHM: ClassVar[str] = "grpo_glam"
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ("algorithm.lr",)
    PER_RANK_FIELDS: ClassVar[tuple[str, ...]] = (
        "env.num_envs",
        "algorithm.minibatch_size",
        "algorithm.groups_per_update",
    )

    algorithm: GRPOAlgorithmConfig = field(default_factory=GRPOAlgorithmConfig)
    run: RunConfig = field(default_factory=lambda: RunConfig(run_dir="runs/grpo_glam"))

    RULES: ClassVar[tuple[Rule, ...]] = (
        *GLAMConfig.RULES,
        Rule(
            "algorithm.group_size",
            lambda c, e: c.algorithm.group_size >= 2 and e.has("reset_in_groups"),
            lambda c, e: (
                "at least 2 (a group compares its episodes)"
                if e.has("reset_in_groups")
                else f"an environment with 'reset_in_groups' (episodes from one start); env={c.env.name!r} has none"
            ),
        ),
        minimum("algorithm.groups_per_update", 1),
        minimum("algorithm.epochs", 1),
        minimum("algorithm.minibatch_size", 1),
        Rule("algorithm.step_weight", lambda c, e: c.algorithm.step_weight >= 0, "a number >= 0"),
        Rule("algorithm.gamma", lambda c, e: 0.0 <= c.algorithm.gamma <= 1.0, "a number in [0, 1]"),
        Rule("algorithm.lr", lambda c, e: c.algorithm.lr > 0, "a positive number"),
        Rule("algorithm.clip_epsilon", lambda c, e: 0.0 < c.algorithm.clip_epsilon < 1.0, "a number in (0, 1)"),
        Rule("algorithm.entropy_coeff", lambda c, e: c.algorithm.entropy_coeff >= 0, "a number >= 0"),
        Rule("algorithm.kl_coeff", lambda c, e: c.algorithm.kl_coeff >= 0, "a number >= 0"),
        Rule(
            "algorithm.max_grad_norm",
            lambda c, e: c.algorithm.max_grad_norm is None or c.algorithm.max_grad_norm > 0,
            "a positive number, or none for no clipping",
        ),
        Rule("algorithm.eps", lambda c, e: c.algorithm.eps > 0, "a positive number"),
    )


#: The presets: ``presets/<name>.yaml`` (name -> values by section; see :class:`Presets`).
GRPO_PRESETS = Presets(Path(__file__).with_name("presets"))


def make_grpo_config(preset: str = "cpu", overrides: dict[str, Any] | None = None) -> GRPOGLAMConfig:
    """The GRPO-GLAM config of a preset with overrides applied, validated.

    Args:
        preset (str): a preset's name (``GRPO_PRESETS``) or the path of a YAML file like theirs.
        overrides (dict[str, Any] | None): values by field path (``{"algorithm.step_level": True}``) or unique name.

    Returns:
        The validated :class:`GRPOGLAMConfig`; a bad value raises a ``ConfigError`` naming the field.
    """
    return config_from_preset(GRPOGLAMConfig, GRPO_PRESETS, preset, overrides)


def parse_grpo_overrides(pairs: list[str]) -> dict[str, Any]:
    """Command-line ``key=value`` pairs -> typed values, by ``GRPOGLAMConfig``'s fields."""
    return parse_overrides(pairs, GRPOGLAMConfig)
