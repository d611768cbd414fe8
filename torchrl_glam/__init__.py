"""torchrl_glam: SAC-GLAM (Gaven et al. 2024) as a TorchRL plugin, with PPO-GLAM and GRPO-GLAM on
the same LLM scorer.

Rooms, each importing only from the ones above it: ``storage`` (files outside a run dir), ``envs``
(the environment protocol; Playground-Text, BabyAI-Text and TextWorld in its subpackages, others
through entry points), ``data`` (n-step, HER, replay), ``offline`` (the offline models: names,
recipes, shipped weights, cache, builders), ``modules`` (loading an LLM, scorer, actor, critic
heads), ``objectives`` (the losses), ``training`` (the run harness), ``algorithms`` (one folder per
algorithm, others through entry points), ``launch`` (Slurm and local jobs).
"""

#: The version, written here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``).
__version__ = "0.4.0"
