"""torchrl_glam: SAC-GLAM (Gaven et al. 2024) as a TorchRL plugin.

Rooms, each importing only from the ones above it: ``envs`` (the environment protocol;
Playground-Text and BabyAI-Text in its subpackages), ``modules`` (LLM scorer, actor, critic heads),
``data`` (n-step, HER, replay), ``offline`` (building the offline models), ``objectives``, ``training``,
``launch``.
"""

__version__ = "0.2.0"
