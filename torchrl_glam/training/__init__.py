"""Training: the run harness every algorithm's script runs in (``run.py``, its command line
``cli.py``), the base config (``config.py``), the registry of training scripts (``scripts.py``),
shared factories, evaluation, checkpoints, logging, data parallel. The algorithms themselves are in
:mod:`torchrl_glam.algorithms`."""
