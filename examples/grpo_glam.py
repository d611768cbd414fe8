"""Runs the grpo-glam training script of the library: ``python examples/grpo_glam.py --help``.

The algorithm box is ``torchrl_glam/algorithms/grpo_glam/train.py`` (under 100 lines: agent,
loop body); the run harness around it is ``torchrl_glam/training/run.py``. Installed, the same
script is the ``grpo-glam`` command, and the Slurm launcher runs it with ``--algorithm grpo_glam``.
"""

import sys

from torchrl_glam.algorithms.grpo_glam.train import cli, main  # noqa: F401  main: for Python callers

if __name__ == "__main__":
    sys.exit(cli())
