"""Losses: SAC-GLAM (and PPO-GLAM) on TorchRL losses."""

from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.objectives.sac_glam import SACGLAMLoss

__all__ = ["PPOGLAMLoss", "SACGLAMLoss"]
