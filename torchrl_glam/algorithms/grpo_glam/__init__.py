"""GRPO-GLAM: its config and presets (``config.py``), what its script builds (``build.py``), its groups
of episodes from one start (``groups.py``), its update (``update.py``) and its training script
(``train.py``). Importing the package loads the config only; the loss is
:class:`~torchrl_glam.objectives.grpo_glam.GRPOGLAMLoss`."""

from torchrl_glam.algorithms.grpo_glam.config import (
    GRPO_PRESETS,
    GRPOAlgorithmConfig,
    GRPOGLAMConfig,
    make_grpo_config,
)

__all__ = ["GRPO_PRESETS", "GRPOAlgorithmConfig", "GRPOGLAMConfig", "make_grpo_config"]
