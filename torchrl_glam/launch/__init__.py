"""Launching on Slurm with submitit: seed arrays, sweeps, preemption and resume, result plots.

``python -m torchrl_glam.launch --help``; results: ``python -m torchrl_glam.launch.results --help``.
"""
from torchrl_glam.launch.job import TrainingJob
from torchrl_glam.launch.sweeps import RunSpec, expand_sweep, load_sweep, parse_seeds

__all__ = ["RunSpec", "TrainingJob", "expand_sweep", "load_sweep", "parse_seeds"]
