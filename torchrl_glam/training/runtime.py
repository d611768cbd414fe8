"""What a run sets up about its process before it builds anything: threads and the device.

Split out of the examples so that a harness (or your own script) does it with one call.
"""
from __future__ import annotations

import torch

from torchrl_glam.training.config import GLAMConfig


def apply_runtime(cfg: GLAMConfig) -> None:
    """Uses ``cfg.num_threads`` torch threads, and fails fast (before a model loads) when
    ``cfg.device`` names a GPU this machine lacks."""
    torch.set_num_threads(cfg.num_threads)
    cfg.check_device()
