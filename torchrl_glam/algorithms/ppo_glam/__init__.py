"""PPO-GLAM: its config and presets (``config.py``), what its script builds (``build.py``), the
rollout it collects (``rollout.py``), its update (``update.py``) and its training script
(``train.py``). Importing the package loads the config only; the loss is
:class:`~torchrl_glam.objectives.ppo_glam.PPOGLAMLoss`."""

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOAlgorithmConfig, PPOGLAMConfig, make_ppo_config

__all__ = ["PPO_PRESETS", "PPOAlgorithmConfig", "PPOGLAMConfig", "make_ppo_config"]
