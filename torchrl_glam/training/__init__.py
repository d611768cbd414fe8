"""Training: the run harness (``run.py``), the training scripts by algorithm (``scripts/``), presets,
factories and updaters, evaluation, checkpoints, logging, data parallel."""
