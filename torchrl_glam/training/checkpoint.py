"""Checkpoints written atomically: a crash while writing never leaves a broken checkpoint.

A checkpoint is one ``torch.save`` file holding everything a run needs to continue exactly: model
(adapters or weights), heads and targets, optimisers, alpha, the replay buffers with priorities,
the environments' state and random generators, the episodes in progress, counters.
"""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import numpy as np
import torch

CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(state: dict, run_dir: str | os.PathLike) -> Path:
    """Writes ``state`` to ``run_dir/checkpoint.pt`` through a temporary file and a rename."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CHECKPOINT_NAME
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=".checkpoint-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def load_checkpoint(run_dir: str | os.PathLike) -> dict | None:
    """The state saved in ``run_dir``, or ``None`` when there is none."""
    path = Path(run_dir) / CHECKPOINT_NAME
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


def seed_everything(seed: int) -> None:
    """Seeds Python's, numpy's (TorchRL's prioritized sampler draws from it) and torch's generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """The states of Python's, numpy's and torch's global generators."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
