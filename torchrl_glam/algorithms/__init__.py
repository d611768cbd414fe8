"""The library's algorithms, one folder each: its config and presets (``config.py``, whose config
class also declares what the run harness needs of it: learning rates, per-rank fields, discount,
divergence metrics), what its script builds from the config (``build.py``: the networks and the
loss, passed each argument by name; replay...), its update (``update.py``) and its training script
(``train.py``, the loop that reads like the paper's algorithm). The losses themselves are TorchRL
``LossModule`` classes in :mod:`torchrl_glam.objectives`.

* :mod:`~torchrl_glam.algorithms.sac_glam`: SAC-GLAM (Gaven et al. 2024), with HER;
* :mod:`~torchrl_glam.algorithms.ppo_glam`: PPO-GLAM (GLAM, Carta et al. 2023);
* :mod:`~torchrl_glam.algorithms.grpo_glam`: GRPO-GLAM (GRPO, Shao et al. 2024; GiGPO, Feng et al. 2025).

:data:`SCRIPTS` is the static table of their training scripts, by algorithm name (the launcher's
``--algorithm``); it imports the configs only, so the command line stays light.
"""

from torchrl_glam.algorithms.grpo_glam.config import GRPO_PRESETS, GRPOGLAMConfig
from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOGLAMConfig
from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
from torchrl_glam.training.scripts import TrainingScript

#: The training scripts, by algorithm name (each config class's ``ALGORITHM``).
SCRIPTS: dict[str, TrainingScript] = {
    SACGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.sac_glam.train", SACGLAMConfig, PRESETS),
    PPOGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.ppo_glam.train", PPOGLAMConfig, PPO_PRESETS),
    GRPOGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.grpo_glam.train", GRPOGLAMConfig, GRPO_PRESETS),
}


def get_script(name: str) -> TrainingScript:
    """The training script of the algorithm ``name`` (a key of :data:`SCRIPTS`)."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown algorithm {name!r}: known are {sorted(SCRIPTS)}")
    return SCRIPTS[name]


__all__ = ["SCRIPTS", "TrainingScript", "get_script"]
