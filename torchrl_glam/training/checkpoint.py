"""Checkpoints written atomically, read safely, with the previous good one kept as a fallback.

A checkpoint is one ``torch.save`` file holding everything a run needs to continue exactly: model
(adapters or weights), heads and targets, optimisers, alpha, the replay buffers with priorities,
the environments' state and random generators, the episodes in progress, counters. It holds
tensors and plain Python data only, and is read with ``torch.load(weights_only=True)``: a
checkpoint file can never run code (a pickle can, and run dirs get copied between machines).

Writing goes through a temporary file and a rename, so a crash never leaves a half-written
``checkpoint.pt``; the checkpoint it replaces becomes ``checkpoint.prev.pt``, used (with a
warning) if the newest one cannot be read. Temporaries left by a killed process are removed.

Integrity: the payload carries the SHA-256 of its own content (every tensor's bytes, dtype and
shape, and every other value, in order) under :data:`DIGEST_KEY`; loading recomputes it, so a file
changed after it was written (a flipped bit, a copy gone wrong) counts as unreadable instead of
training on. A checkpoint from before the digest loads unverified.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import os
import pickle
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

CHECKPOINT_NAME = "checkpoint.pt"
PREVIOUS_NAME = "checkpoint.prev.pt"
_TMP_PREFIX, _TMP_SUFFIX = ".checkpoint-", ".tmp"
DIGEST_KEY = "content_sha256"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read (and no readable previous one)."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint whose loading would execute code: refused, never replaced by the previous one."""


_TD_TAG = "__tensordict__"


def _map_dict(obj: dict, fn) -> dict:
    out = copy.copy(obj)  # keeps a subclass and its attributes (a state_dict's _metadata)
    for key, value in obj.items():
        out[key] = fn(value)
    return out


def _to_plain(obj):
    """TensorDicts (episodes in progress, rollouts) as tagged plain dicts of tensors: torch.load
    with weights_only=True refuses tensordict's own pickling (it names a function to call)."""
    if isinstance(obj, TensorDictBase):
        return {_TD_TAG: _to_plain(obj.to_dict()), "batch_size": list(obj.batch_size)}
    if isinstance(obj, dict):
        return _map_dict(obj, _to_plain)
    if type(obj) is list:
        return [_to_plain(v) for v in obj]
    if type(obj) is tuple:  # not torch.Size or named tuples: kept as they are
        return tuple(_to_plain(v) for v in obj)
    return obj


def _from_plain(obj):
    if isinstance(obj, dict):
        if _TD_TAG in obj and set(obj) == {_TD_TAG, "batch_size"}:
            return TensorDict(_from_plain(obj[_TD_TAG]), batch_size=obj["batch_size"])
        return _map_dict(obj, _from_plain)
    if type(obj) is list:
        return [_from_plain(v) for v in obj]
    if type(obj) is tuple:
        return tuple(_from_plain(v) for v in obj)
    return obj


def content_digest(obj) -> str:
    """The SHA-256 of a checkpoint's plain content (as written by :func:`_to_plain`)."""
    digest = hashlib.sha256()
    _hash_into(digest, obj)
    return digest.hexdigest()


def _hash_into(digest, obj) -> None:
    if isinstance(obj, torch.Tensor):
        digest.update(f"tensor {obj.dtype} {tuple(obj.shape)}:".encode())
        if obj.layout == torch.strided and not obj.is_quantized and obj.device.type != "meta":
            tensor = obj.detach().cpu().contiguous().reshape(-1)
            digest.update(tensor.view(torch.uint8).numpy())  # the raw bytes, whatever the dtype
    elif isinstance(obj, dict):
        digest.update(f"dict {len(obj)}:".encode())
        for key, value in obj.items():
            _hash_into(digest, key)
            _hash_into(digest, value)
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__} {len(obj)}:".encode())
        for value in obj:
            _hash_into(digest, value)
    else:
        digest.update(f"{type(obj).__name__} {obj!r};".encode())


def remove_stale_temporaries(run_dir: str | os.PathLike) -> list[Path]:
    """Removes ``.checkpoint-*.tmp`` files a killed process left behind (one process owns a run
    dir at a time: see ``training/rundir.py``, so no live writer is using them)."""
    removed = []
    for path in Path(run_dir).glob(f"{_TMP_PREFIX}*{_TMP_SUFFIX}"):
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed


def save_checkpoint(state: dict, run_dir: str | os.PathLike) -> Path:
    """Writes ``state`` to ``run_dir/checkpoint.pt`` through a temporary file and a rename, with
    its content digest; the checkpoint it replaces is kept as ``checkpoint.prev.pt``. A full disk
    raises an ``OSError`` that says so and names the file."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(run_dir)
    path = run_dir / CHECKPOINT_NAME
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
    try:
        plain = _to_plain(state)
        with os.fdopen(fd, "wb") as f:
            torch.save({**plain, DIGEST_KEY: content_digest(plain)}, f)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.replace(path, run_dir / PREVIOUS_NAME)  # a kill between the renames: prev is read
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    except BaseException as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        if _is_disk_full(err):
            raise OSError(
                errno.ENOSPC,
                f"No space left on device while writing {path}: free space "
                "there (the previous checkpoint is intact), then continue with --resume",
            ) from None
        raise
    return path


def _is_disk_full(err: BaseException) -> bool:
    # torch's zip writer reports a full disk as a RuntimeError carrying the C library's text
    return getattr(err, "errno", None) == errno.ENOSPC or "No space left on device" in str(err)


def _verified(path: Path, plain) -> dict:
    """``plain`` without its digest; raises a :class:`CheckpointError` when the digest disagrees."""
    if not isinstance(plain, dict):
        raise CheckpointError(
            f"{path} holds a {type(plain).__name__}, not a checkpoint's dict: "
            "it is corrupted or not a torchrl_glam checkpoint"
        )
    plain = dict(plain)
    saved = plain.pop(DIGEST_KEY, None)
    if saved is not None and saved != content_digest(plain):
        raise CheckpointError(
            f"{path} is corrupted: its content fails the integrity check (SHA-256 "
            "of what was written), so it changed after it was written (a damaged disk or copy)"
        )
    return plain


def _read(path: Path) -> dict:
    try:
        plain = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # torch words every failure of a weights-only load "Weights only load failed" (a text file
        # too); only a global the unpickler refused means the file asks to run code.
        if "unsupported global" in str(err).lower():
            raise UnsafeCheckpointError(
                f"refusing to load {path}: it holds Python objects that loading would have to "
                "execute, which no checkpoint of this project contains (it was not written by "
                "torchrl_glam, or by an older version). Delete it or start a new --run-dir."
            ) from None
        raise CheckpointError(f"{path} is not a readable checkpoint ({err})") from err
    except Exception as err:  # anything else torch.load raises on a damaged file (a few bytes: IndexError)
        size = path.stat().st_size if path.exists() else 0
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({size} bytes; {type(err).__name__}: {err}): "
            "it is truncated or corrupted"
        ) from err
    return _from_plain(_verified(path, plain))


def read_checkpoint(path: str | os.PathLike) -> dict:
    """The state in one checkpoint file, for readers of a run (reports): it changes nothing on
    disk (unlike :func:`load_checkpoint`, which owns the run dir and clears its stale
    temporaries), so it is safe on a run that is still writing. Raises :class:`CheckpointError`
    (or :class:`UnsafeCheckpointError`) as loading does."""
    return _read(Path(path))


#: Entries that checkpoints of earlier 0.2 commits name otherwise (the loss's trainable weights were
#: "agent"): read under their current name, so those runs still resume and load.
FORMER_ENTRY_NAMES = {"agent": "loss"}


def _current_names(state: dict) -> dict:
    for old, new in FORMER_ENTRY_NAMES.items():
        if old in state and new not in state:
            state[new] = state.pop(old)
    return state


def load_checkpoint(run_dir: str | os.PathLike) -> dict | None:
    """The state saved in ``run_dir``, or ``None`` when there is none.

    When ``checkpoint.pt`` cannot be read (truncated, empty), ``checkpoint.prev.pt`` is used with
    a warning; when neither can, a :class:`CheckpointError` names the file and what to do.
    """
    run_dir = Path(run_dir)
    if run_dir.exists():
        remove_stale_temporaries(run_dir)
    path, previous = run_dir / CHECKPOINT_NAME, run_dir / PREVIOUS_NAME
    if not path.exists() and not previous.exists():
        return None
    try:
        if not path.exists():
            raise CheckpointError(f"{path} is missing")
        return _current_names(_read(path))
    except UnsafeCheckpointError:
        raise  # a crafted file is not a torn write: no fallback, whatever the previous one holds
    except CheckpointError as err:
        if not previous.exists():
            raise CheckpointError(
                f"{err}. No readable previous checkpoint ({previous.name}) to fall back to: "
                f"start again without --resume in a new --run-dir (or with --overwrite in {run_dir})."
            ) from None
        state = _read(previous)
        warnings.warn(
            f"{err}; resuming from the previous checkpoint {previous} instead (the steps since then are replayed)",
            stacklevel=2,
        )
        print(f"warning: {err}; resuming from the previous checkpoint {previous}")
        return _current_names(state)


def seed_everything(seed: int) -> None:
    """Seeds Python's, numpy's (TorchRL's prioritized sampler draws from it) and torch's generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """The states of Python's, numpy's and torch's global generators, as tensors and plain data
    (what ``torch.load(weights_only=True)`` reads)."""
    name, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {
            "name": str(name),
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    numpy = state["numpy"]
    np.random.set_state(
        (
            numpy["name"],
            numpy["keys"].numpy().astype(np.uint32),
            numpy["position"],
            numpy["has_gauss"],
            numpy["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
