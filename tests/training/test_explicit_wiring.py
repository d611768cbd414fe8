"""``make_loss`` passes each loss argument from the config by name (issue 74: it once matched
config fields to the loss's parameters by name, so a renamed field silently fell back to the
loss's default): every argument of each loss, set off its default in the config, reaches the loss."""

import inspect

import pytest
import torch

from torchrl_glam.algorithms.grpo_glam.build import make_loss as make_grpo_loss
from torchrl_glam.algorithms.grpo_glam.config import make_grpo_config
from torchrl_glam.algorithms.ppo_glam.build import make_loss as make_ppo_loss
from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.modules import DuelingCriticHead
from torchrl_glam.objectives import GRPOGLAMLoss, PPOGLAMLoss, SACGLAMLoss

#: the arguments a loss takes from elsewhere than a config field of its own
NOT_FIELDS = {"scorer", "num_actions", "qvalue_network", "success_network", "value_network", "environment"}


def widths(head) -> list[int]:
    return [m.out_features for m in head.modules() if isinstance(m, torch.nn.Linear)]


def test_every_sac_loss_argument_comes_from_the_config():
    values = {
        "critic_input": "observation",
        "critic_width": 8,
        "critic_backprop": False,
        "gamma": 0.7,
        "alpha_init": 0.2,
        "target_entropy": 0.3,
        "target_llm": True,
        "success_loss_coef": 0.5,
        "critic_loss": "l2",
    }
    loss = make_loss(make_config("smoke", values), num_actions=5)
    reached = {
        "critic_input": "observation" if loss.head_keys == ["prompt_hidden"] else None,
        "critic_width": widths(loss.sac.qvalue_network)[0],
        "critic_backprop": loss.critic_backprop,
        "gamma": float(loss.sac.value_estimator.gamma),
        "alpha_init": loss.alpha().item(),
        "target_entropy": float(loss.sac.target_entropy),
        "target_llm": loss.target_llm is not None,
        "success_loss_coef": loss.success_loss_coef if loss.success_head is not None else None,
        "critic_loss": loss.sac.loss_function,
    }
    assert reached == pytest.approx(values)
    assert widths(loss.success_head) == [8, 8, 5]  # the Q-heads' design
    dueling = make_loss(make_config("smoke", {"critic_dueling": True}), num_actions=5)
    assert isinstance(dueling.sac.qvalue_network.module, DuelingCriticHead)
    # a new argument of the loss must be wired in make_loss and checked here
    arguments = set(inspect.signature(SACGLAMLoss).parameters) - NOT_FIELDS
    assert arguments <= set(values) | {"critic_dueling"}, arguments - set(values)


def test_every_ppo_loss_argument_comes_from_the_config():
    values = {
        "clip_epsilon": 0.3,
        "entropy_coeff": 0.02,
        "critic_coeff": 0.7,
        "gamma": 0.8,
        "gae_lambda": 0.9,
        "value_width": 8,
        "ppo_loss": "kl",
        "kl_coeff": 2.0,
        "kl_target": 0.05,
        "clip_value": 0.1,
        "normalize_advantage": True,
        "bootstrap_time_limit": False,
    }
    loss = make_ppo_loss(make_ppo_config("smoke", values))
    reached = {
        "clip_epsilon": loss.clip_epsilon,
        "entropy_coeff": float(loss.ppo.entropy_coeff),
        "critic_coeff": float(loss.ppo.critic_coeff),
        "gamma": float(loss.ppo.value_estimator.gamma),
        "gae_lambda": float(loss.ppo.value_estimator.lmbda),
        "value_width": widths(loss.value)[0],
        "ppo_loss": loss.loss_kind,
        "kl_coeff": float(loss.ppo.beta),
        "kl_target": float(loss.ppo.dtarg),
        "clip_value": loss.clip_value,
        "normalize_advantage": loss.ppo.normalize_advantage,
        "bootstrap_time_limit": loss.bootstrap_time_limit,
    }
    assert reached == pytest.approx(values)
    assert make_ppo_loss(make_ppo_config("smoke", {"her_centred": True})).centred
    arguments = set(inspect.signature(PPOGLAMLoss).parameters) - NOT_FIELDS
    assert arguments <= set(values) | {"centred", "score_chunk"}, arguments - set(values)


def test_every_grpo_loss_argument_comes_from_the_config():
    values = {
        "group_size": 3,
        "clip_epsilon": 0.3,
        "entropy_coeff": 0.02,
        "kl_coeff": 0.05,
        "step_level": True,
        "step_weight": 0.5,
        "gamma": 0.8,
        "eps": 1e-4,
    }
    loss = make_grpo_loss(make_grpo_config("smoke", values))
    reached = {
        "group_size": loss.group_size,
        "clip_epsilon": float(loss.ppo.clip_epsilon),
        "entropy_coeff": float(loss.ppo.entropy_coeff),
        "kl_coeff": loss.kl_coeff,
        "step_level": loss.step_level,
        "step_weight": loss.step_weight,
        "gamma": loss.gamma,
        "eps": loss.eps,
    }
    assert reached == pytest.approx(values)
    arguments = set(inspect.signature(GRPOGLAMLoss).parameters) - NOT_FIELDS
    assert arguments <= set(values) | {"score_chunk"}, arguments - set(values)
