"""Mixed precision for the LLM: its forward and backward under ``torch.autocast`` in bfloat16, its
weights (and the optimiser's state) float32, where the device computes bfloat16 fast.

Whole-model bfloat16 weights (``dtype="bfloat16"``) would round full fine-tuning's small Adam steps
away; autocast keeps float32 master weights and runs the matrix products in bfloat16. On a CPU
without bfloat16 instructions autocast's products are emulated, slower than float32: refused there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

#: /proc/cpuinfo flags of x86 CPUs with bfloat16 matrix instructions (AVX512-BF16, AMX)
CPU_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")


def has_fast_bfloat16(device: str | torch.device) -> bool:
    """Whether ``device`` computes bfloat16 products natively: a CUDA GPU that supports them
    (``torch.cuda.is_bf16_supported``), a Linux x86 CPU with AVX512-BF16 or AMX. Elsewhere
    (macOS, other CPUs) ``False``: nothing public says so.

    Examples:
        >>> from torchrl_glam.modules.mixed_precision import has_fast_bfloat16
        >>> isinstance(has_fast_bfloat16("cpu"), bool)
        True
    """
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu" or not sys.platform.startswith("linux"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f" {flag}" in flags for flag in CPU_BFLOAT16_FLAGS)
