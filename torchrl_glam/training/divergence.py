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


def value_bound(gamma: float, max_steps: int) -> float:
    """The largest ``abs(value)`` a return can have: max_reward / (1 - gamma), or max_steps x max_reward."""
    horizon = max_steps if gamma >= 1.0 else 1.0 / (1.0 - gamma)  # bootstraps past truncation
    return MAX_REWARD * max(horizon, 1.0)


def check_divergence(metrics: dict[str, float], cfg: GLAMConfig, steps: int | None = None) -> None:
    """Raises a :class:`DivergenceError` (on every rank together) when an update's metrics that
    the config class declares are beyond the margin: its ``DIVERGENCE_VALUE_METRICS`` (estimates
    of a return, SAC's ``q_value``, by what they are) in absolute value, its ``DIVERGENCE_LOSS_METRICS`` (squared
    value errors, PPO's ``loss_critic``, by the field of their weight) squared. The bound comes
    from the config's ``DISCOUNT_FIELD``."""
    config_class = type(cfg)
    values, losses = config_class.DIVERGENCE_VALUE_METRICS, config_class.DIVERGENCE_LOSS_METRICS
    if not values and not losses:
        return
    if config_class.DISCOUNT_FIELD is None:
        raise ValueError(
            f"{config_class.__name__} declares divergence metrics but no DISCOUNT_FIELD: "
            "name its discount's field (e.g. DISCOUNT_FIELD = 'algorithm.gamma'), which bounds the returns"
        )
    gamma = cfg.get(config_class.DISCOUNT_FIELD)
    bound = value_bound(gamma, cfg.env.max_steps)
    limit = DIVERGENCE_MARGIN * bound
    problem = None
    for name, what in values.items():
        if name in metrics and not abs(metrics[name]) <= limit:
            problem = f"{what} is {metrics[name]:.4g}, beyond {limit:g}"
    for name, weight_field in losses.items():
        weight = cfg.get(weight_field)
        if name in metrics and weight > 0 and not metrics[name] <= weight * limit**2:
            problem = f"the value loss ({name}) is {metrics[name]:.4g}, beyond {weight * limit**2:g}"
    if not any_true(problem is not None):
        return
    problem = problem or "another rank's critic diverged"
    lrs = ", ".join(f"{name.rsplit('.', 1)[-1]}={cfg.get(name)}" for name in config_class.LEARNING_RATE_FIELDS)
    message = (
        f"the critic diverged at {steps} environment steps: {problem} "
        f"({DIVERGENCE_MARGIN:g} x the largest return, {bound:g}, with gamma="
        f"{gamma}). Lower the learning rate ({lrs}; --resume may change it) or "
        "set max_grad_norm (in a new --run-dir)"
    )
    if not is_distributed() or torch.distributed.get_rank() == 0:
        record_event(cfg.run.run_dir, "diverged", env_steps=steps, problem=problem)
    raise DivergenceError(message)
