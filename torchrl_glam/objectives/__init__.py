"""Losses: SAC-GLAM, PPO-GLAM and GRPO-GLAM on TorchRL losses."""

from torchrl_glam.objectives.grpo_glam import GRPOGLAMLoss
from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.objectives.sac_glam import SACGLAMLoss

__all__ = ["GRPOGLAMLoss", "PPOGLAMLoss", "SACGLAMLoss"]
