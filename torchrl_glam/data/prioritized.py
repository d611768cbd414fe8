"""Make TorchRL's ``PrioritizedSampler`` work wherever torchrl's compiled extension does not load.

TorchRL's prioritized replay keeps priorities in C++ segment trees (``torchrl._torchrl``). A torchrl
wheel is built against one torch release; installed beside another (torchrl 0.14.1 with torch 2.13
here) the extension fails to load with an undefined symbol, and ``PrioritizedSampler`` raises
"SumSegmentTreeFp32 is not available". torchrl ships the C++ sources of that extension
(``torchrl/csrc``), so :func:`ensure_prioritized_replay` compiles them against the installed torch
once (~40 s, cached under ``$TORCH_EXTENSIONS_DIR``, needs a C++ compiler and ninja) and hands the
segment trees to the sampler. Nothing of torchrl is copied or rewritten here; where the wheel's
extension loads (the usual case on a matching install), this does nothing.
"""
from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_TREES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64")


def _build_extension():
    import torchrl
    from torch.utils.cpp_extension import load

    csrc = os.path.join(os.path.dirname(torchrl.__file__), "csrc")
    sources = [os.path.join(csrc, name) for name in ("pybind.cpp", "utils.cpp")]
    missing = [s for s in sources if not os.path.exists(s)]
    if missing:
        raise RuntimeError(
            f"torchrl's compiled extension does not load and its C++ sources are missing ({missing}): "
            "install a torchrl wheel built for your torch version (pip install 'torchrl==X' matching "
            "torch), or build torchrl from source"
        )
    # The module name must be "_torchrl": it is the name PYBIND11_MODULE gives in pybind.cpp.
    return load(name="_torchrl", sources=sources, extra_include_paths=[csrc], verbose=False)


def ensure_prioritized_replay() -> None:
    """Makes ``torchrl.data.PrioritizedSampler`` usable, compiling torchrl's segment trees if needed."""
    from torchrl.data.replay_buffers.samplers import prioritized

    if all(getattr(prioritized, name) is not None for name in _TREES):
        return
    with _lock:
        if all(getattr(prioritized, name) is not None for name in _TREES):
            return
        try:
            extension = _build_extension()
        except RuntimeError:
            raise
        except Exception as err:  # compiler or ninja missing, build error
            raise RuntimeError(
                "PrioritizedSampler needs torchrl's segment trees: the torchrl wheel's extension does not "
                "load against this torch, and compiling torchrl's C++ sources failed "
                f"({type(err).__name__}: {err}). Install a C++ compiler and `pip install ninja`, or a "
                "torchrl wheel built for this torch version."
            ) from err
        for name in _TREES:
            # the sampler reads these module globals when it builds its trees
            setattr(prioritized, name, getattr(extension, name))
