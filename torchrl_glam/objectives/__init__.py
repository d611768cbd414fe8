"""Losses: SAC-GLAM (and PPO-GLAM) on TorchRL losses."""
