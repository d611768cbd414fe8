"""torchrl_glam: SAC-GLAM (Gaven et al. 2024) as a TorchRL plugin.

Rooms, each importing only from the ones above it:
``envs`` (Playground-Text), ``modules`` (LLM scorer, actor, critic heads), ``data`` (n-step, HER,
replay), ``objectives``, ``training``, ``launch``.
"""

__version__ = "0.2.0"
