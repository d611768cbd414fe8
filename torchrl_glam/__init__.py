"""torchrl_glam: SAC-GLAM (Gaven et al. 2024) as a TorchRL plugin.

Rooms, each importing only from the ones above it: ``envs`` (the environment protocol;
Playground-Text and BabyAI-Text in its subpackages), ``data`` (n-step, HER, replay), ``offline``
(the offline models: names, recipes, shipped weights, cache, builders), ``modules`` (loading an LLM,
scorer, actor, critic heads), ``objectives``, ``training``, ``algorithms``, ``launch``.
"""

#: The version, written here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``).
__version__ = "0.3.0"
