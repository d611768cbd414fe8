"""SAC-GLAM: its config and presets (``config.py``), what its script builds (``build.py``), its
update (``update.py``) and its training script (``train.py``). Importing the package loads the config
only (the command line answers before torch loads); the loss is
:class:`~torchrl_glam.objectives.sac_glam.SACGLAMLoss`."""

from torchrl_glam.algorithms.sac_glam.config import (
    PRESETS,
    ReplayConfig,
    SACAlgorithmConfig,
    SACGLAMConfig,
    make_config,
    parse_overrides,
)

__all__ = ["PRESETS", "ReplayConfig", "SACAlgorithmConfig", "SACGLAMConfig", "make_config", "parse_overrides"]
