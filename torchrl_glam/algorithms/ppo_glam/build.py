"""What PPO-GLAM's training script builds from its config: the loss (LLM agent, value head, PPO
loss) in one call."""

from __future__ import annotations

from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig
from torchrl_glam.modules import GLAMAgent
from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.training.factories import loss_arguments, make_glam_agent


def make_loss(cfg: PPOGLAMConfig, agent: GLAMAgent | None = None) -> PPOGLAMLoss:
    """The PPO-GLAM loss of ``cfg`` in one call: the value head and the PPO loss (clipped or
    KL-penalised) over ``agent`` (default a new one of ``cfg``), every loss argument taken from the
    config field of the same name (``centred`` from ``her_centred``)."""
    agent = make_glam_agent(cfg) if agent is None else agent
    return PPOGLAMLoss(agent, **loss_arguments(PPOGLAMLoss, cfg, centred="her_centred")).to(cfg.model.device)
