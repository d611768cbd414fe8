"""Building an offline model into the cache once, whoever asks: one builder at a time across
processes (the ranks of a data-parallel run, Slurm array jobs, test workers), atomically."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from torchrl_glam.offline.models import is_complete
from torchrl_glam.storage import CACHE_FIX, file_lock

logger = logging.getLogger(__name__)


def is_main_process() -> bool:
    """Rank 0 of an initialised process group, or of the ``RANK`` that torchrun and the Slurm
    launcher export before it is initialised; a single process is its own main process."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return os.environ.get("RANK", "0").strip() in ("", "0")


def build_lock(final: Path):
    """An exclusive lock on building ``final``, across processes (and threads): the first caller
    gets it at once; the others log one line saying what they wait for, and block
    (:func:`~torchrl_glam.storage.file_lock` on ``.<final>.lock`` beside it)."""
    return file_lock(
        final.parent / f".{final.name}.lock",
        waiting=f"waiting for another process to finish building {final} (it shows the progress; this process "
        "loads the result)",
        fix=CACHE_FIX,
    )


def build_into_cache(final: Path, build, rebuild: bool = False) -> Path:
    """``final`` once it holds a model, calling ``build(directory)`` to make it if needed.

    One builder at a time (:func:`build_lock`): the ranks of a data-parallel run, array jobs and
    test workers that all ask for the model wait for the first one's build instead of each
    building it. The build goes into a temporary directory next to ``final`` that is renamed into
    place (atomic), so an interrupted build never leaves a half-written ``final``; a ``final``
    without config or weights (a build interrupted by an older version) is replaced, and so is a
    complete one with ``rebuild``.
    """
    if is_complete(final) and not rebuild:
        return final
    with build_lock(final):
        if is_complete(final) and not rebuild:  # built by the process we waited for
            return final
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        try:
            build(staging)
            if final.exists():
                shutil.rmtree(final)  # a broken leftover (we hold the lock)
            os.rename(staging, final)  # atomic on one filesystem
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return final
