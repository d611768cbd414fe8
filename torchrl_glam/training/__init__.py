"""Training: the run harness every algorithm's script runs in (``run.py``, its command line
``cli.py``), the base config (``config.py``), a training script as the table of algorithms lists
it (``scripts.py``), shared factories, evaluation, checkpoints, logging, data parallel. The
algorithms themselves are in :mod:`torchrl_glam.algorithms`."""
