"""A training script, as the tables of algorithms list it: ``main(argv) -> exit code``, found by
import name, its config class and presets.

``examples/<algorithm>.py``, the ``sac-glam`` / ``ppo-glam`` commands, the Slurm launcher
(``--algorithm``) and the training benchmark all run these modules by import name (a wheel install
has no ``examples/`` folder). The library's table is :data:`torchrl_glam.algorithms.SCRIPTS`;
another package declares its own under the entry-point group ``torchrl_glam.algorithms``
(:func:`torchrl_glam.algorithms.get_script`). The harness itself needs no table: what it needs of
an algorithm, its config class declares (:class:`~torchrl_glam.training.config.GLAMConfig`'s ``ALGORITHM``,
``LEARNING_RATE_FIELDS``...).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from torchrl_glam.training.config import GLAMConfig


@dataclass(frozen=True)
class TrainingScript:
    """A training script: its module (with ``main(argv) -> int``), its config class and presets."""

    module: str
    config_class: type[GLAMConfig]
    presets: dict[str, dict[str, Any]]

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    @property
    def main(self) -> Callable[[list[str] | None], int]:
        return self.load().main

    @property
    def path(self) -> Path:
        return Path(self.load().__file__)
