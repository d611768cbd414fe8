"""The library's algorithms, one folder each: its config and presets (``config.py``), what its
script builds from the config (``build.py``: the loss in one call, replay...), its update
(``update.py``) and its training script (``train.py``, the loop that reads like the paper's
algorithm). The losses themselves are TorchRL ``LossModule`` classes in :mod:`torchrl_glam.objectives`.

* :mod:`~torchrl_glam.algorithms.sac_glam`: SAC-GLAM (Gaven et al. 2024), with HER;
* :mod:`~torchrl_glam.algorithms.ppo_glam`: PPO-GLAM (GLAM, Carta et al. 2023).

Importing this package registers both training scripts (:mod:`torchrl_glam.training.scripts`).
"""

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOGLAMConfig
from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
from torchrl_glam.training.scripts import SCRIPTS, get_script, register_script

register_script("sac_glam", "torchrl_glam.algorithms.sac_glam.train", SACGLAMConfig, PRESETS)
register_script("ppo_glam", "torchrl_glam.algorithms.ppo_glam.train", PPOGLAMConfig, PPO_PRESETS)

__all__ = ["SCRIPTS", "get_script", "register_script"]
