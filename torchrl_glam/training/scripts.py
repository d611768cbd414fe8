"""The registry of training scripts, by algorithm name: one ``main(argv) -> exit code`` each.

``examples/<algorithm>.py``, the ``sac-glam`` / ``ppo-glam`` commands, the Slurm launcher
(``--algorithm``) and the training benchmark all run these modules, found by import name (a wheel
install has no ``examples/`` folder). The library's algorithms (:mod:`torchrl_glam.algorithms`)
register theirs when that package is imported; a new algorithm registers its module with
:func:`register_script`.
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


SCRIPTS: dict[str, TrainingScript] = {}


def register_script(name: str, module: str, config_class: type[GLAMConfig], presets: dict[str, dict[str, Any]]) -> None:
    """Makes ``module`` (an importable module with ``main(argv)``) the training script of ``name``."""
    SCRIPTS[name] = TrainingScript(module, config_class, presets)


def get_script(name: str) -> TrainingScript:
    if name not in SCRIPTS:
        raise ValueError(
            f"unknown algorithm {name!r}: known are {sorted(SCRIPTS)} "
            "(register another with torchrl_glam.training.scripts.register_script)"
        )
    return SCRIPTS[name]
