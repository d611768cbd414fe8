"""A diverging critic is a failed run, not a finished one.

Rewards are at most 1 (the environment's success reward), so every return, and every value a
healthy critic predicts, is bounded by ``1 / (1 - gamma)`` (by ``max_steps`` when ``gamma = 1``:
an episode lasts at most that many steps). SAC's soft values add the entropy bonus,
``alpha * log(num_actions)`` per step at most: about 0.1 with the presets' alpha. A critic whose
values pass ``DIVERGENCE_MARGIN`` (10) times the bound is diverging, never learning: 10x leaves
room for the entropy bonus with alpha up to ~4 and for early noise, while the runs that diverged
(``critic_lr=1e9``) reached ``abs(Q) ~ 1e10``. PPO's value loss is checked against the same bound
(a value and its target both within it differ by at most twice the bound).
"""

from __future__ import annotations

import torch.distributed

from torchrl_glam.training.config import GLAMConfig
from torchrl_glam.training.distributed import any_true, is_distributed
from torchrl_glam.training.rundir import record_event

MAX_REWARD = 1.0
DIVERGENCE_MARGIN = 10.0


class DivergenceError(RuntimeError):
    """The critic's values left every bound a learning critic can reach."""


def value_bound(cfg: GLAMConfig) -> float:
    """The largest ``abs(value)`` a return can have: max_reward / (1 - gamma), or max_steps x max_reward."""
    gamma = cfg.get("gamma") if cfg.has_field("gamma") else 0.99
    horizon = cfg.env.max_steps if gamma >= 1.0 else 1.0 / (1.0 - gamma)  # bootstraps past truncation
    return MAX_REWARD * max(horizon, 1.0)


def check_divergence(metrics: dict[str, float], cfg: GLAMConfig, steps: int | None = None) -> None:
    """Raises a :class:`DivergenceError` (on every rank together) when the update's critic values
    (SAC's ``q_value``) or value loss (PPO's ``loss_critic``) are beyond the margin."""
    limit = DIVERGENCE_MARGIN * value_bound(cfg)
    problem = None
    if "q_value" in metrics and not abs(metrics["q_value"]) <= limit:
        problem = f"the critic's Q-value is {metrics['q_value']:.4g}, beyond {limit:g}"
    # PPO's value-loss weight; SAC has none
    critic_coeff = cfg.get("critic_coeff") if cfg.has_field("critic_coeff") else 0.0
    if "loss_critic" in metrics and critic_coeff > 0 and not metrics["loss_critic"] <= critic_coeff * limit**2:
        problem = f"the value loss is {metrics['loss_critic']:.4g}, beyond {critic_coeff * limit**2:g}"
    if not any_true(problem is not None):
        return
    problem = problem or "another rank's critic diverged"
    lrs = ", ".join(f"{name}={cfg.get(name)}" for name in ("critic_lr", "actor_lr", "lr") if cfg.has_field(name))
    message = (
        f"the critic diverged at {steps} environment steps: {problem} "
        f"({DIVERGENCE_MARGIN:g} x the largest return, {value_bound(cfg):g}, with gamma="
        f"{cfg.get('gamma')}). Lower the learning rate ({lrs}; --resume may change it) or "
        "set max_grad_norm (in a new --run-dir)"
    )
    if not is_distributed() or torch.distributed.get_rank() == 0:
        record_event(cfg.run.run_dir, "diverged", env_steps=steps, problem=problem)
    raise DivergenceError(message)
