"""Launching on Slurm with submitit: seed arrays, sweeps, preemption and resume.

``python -m torchrl_glam.launch --help``. The figures of finished runs: ``python -m
experiments.tools.results --help``, from a checkout (the research record, not in the package).
"""

from torchrl_glam.launch.job import TrainingJob
from torchrl_glam.launch.sweeps import RunSpec, expand_sweep, load_sweep, parse_seeds

__all__ = ["RunSpec", "TrainingJob", "expand_sweep", "load_sweep", "parse_seeds"]
