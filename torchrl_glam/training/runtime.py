"""What a run sets up about its process before it builds anything: threads, memory reuse and the
device.

Split out of the examples so that a harness (or your own script) does it with one call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch

from torchrl_glam.training.config import GLAMConfig

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# the largest mmap threshold glibc accepts on 64-bit machines (DEFAULT_MMAP_THRESHOLD_MAX)
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def apply_runtime(cfg: GLAMConfig) -> None:
    """Uses ``cfg.run.num_threads`` torch threads, keeps freed memory for reuse
    (:func:`reuse_freed_memory`), and fails fast (before a model loads) when ``cfg.model.device`` names
    a GPU this machine lacks."""
    torch.set_num_threads(cfg.run.num_threads)
    reuse_freed_memory()
    cfg.check_device()


def reuse_freed_memory() -> bool:
    """Makes glibc's malloc keep the memory a process frees for its next allocations, instead of
    handing blocks of a few MB back to the kernel; returns whether it could (glibc only).

    Why: a SAC-GLAM update on CPU allocates and frees ~100 MB of activations in blocks of 1-8 MB.
    By default glibc maps such blocks afresh or trims its heap once they are freed, so every
    update touches new pages again (thousands of page faults per update, several percent of its
    time; about a tenth of them with this). PyTorch's CPU
    allocator has no cache of its own. The cost: a process keeps its peak heap until it exits,
    which the next update would take again anyway. Blocks above 32 MB are still mapped apart.

    Examples:
        >>> from torchrl_glam.training.runtime import reuse_freed_memory
        >>> reuse_freed_memory() in (True, False)  # True with glibc (Linux), False elsewhere
        True
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # no C library found, or one without mallopt
        return False
    # mallopt returns 1 on success; setting either threshold also stops glibc adjusting them
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
