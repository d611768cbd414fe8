"""Checkpoints written atomically, read safely, with the previous good one kept as a fallback.

A checkpoint is one ``torch.save`` file holding everything a run needs to continue exactly: model
(adapters or weights), heads and targets, optimisers, alpha, the replay buffers with priorities,
the environments' state and random generators, the episodes in progress, counters. It holds
tensors and plain Python data only, and is read with ``torch.load(weights_only=True)``: a
checkpoint file can never run code (a pickle can, and run dirs get copied between machines).

Writing goes through a temporary file and a rename, so a crash never leaves a half-written
``checkpoint.pt``; the checkpoint it replaces becomes ``checkpoint.prev.pt``, used (with a
warning) if the newest one cannot be read. Temporaries left by a killed process are removed.

Integrity: the payload carries the SHA-256 of a canonical form of its content under
:data:`DIGEST_KEY`; loading recomputes it, so a file changed after it was written (a flipped bit, a
copy gone wrong) counts as unreadable instead of training on. The canonical form is a function of
the values alone (every tensor's dtype, shape and bytes; every number, string and container with
its type), never of a set's iteration order, a dict's insertion order or a ``repr``, which a
reading process may see otherwise than the writing one. A checkpoint without a digest loads
unverified (torchrl_glam 0.1.0 wrote none: the run then refuses its layout, naming the version); one
with torchrl_glam 0.2's digest (:data:`DIGEST_0_2_KEY`, a function of sets' iteration order) is
refused, naming the version.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import logging
import os
import pickle
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_glam.storage import StorageError, error_chain, make_folder
from torchrl_glam.training.compatibility import written_by
from torchrl_glam.training.rundir import checked_path, record_written

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
PREVIOUS_NAME = "checkpoint.prev.pt"
_TMP_PREFIX, _TMP_SUFFIX = ".checkpoint-", ".tmp"
DIGEST_KEY = "canonical_sha256"
#: The digest torchrl_glam 0.2 wrote, a function of sets' iteration order: its checkpoints are refused.
DIGEST_0_2_KEY = "content_sha256"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read (and no readable previous one)."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint whose loading would execute code: refused, never replaced by the previous one."""


class CheckpointVersionError(CheckpointError):
    """A checkpoint of a torchrl_glam version this one does not read: refused, never replaced by the
    previous one (written by the same version)."""


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
    """The SHA-256 of the canonical form of a checkpoint's plain content (as written by
    :func:`_to_plain`); raises a ``TypeError`` naming where a value no checkpoint holds is."""
    return _canonical_digest(obj, "state").hex()


def _canonical_digest(obj, where: str) -> bytes:
    # Each value is hashed apart and containers combine their entries' digests: a set's and a
    # dict's entries are combined sorted, so neither iteration order reaches the digest.
    digest = hashlib.sha256()
    if isinstance(obj, torch.Tensor):
        digest.update(f"tensor {obj.dtype} {tuple(obj.shape)}:".encode())
        if obj.layout == torch.strided and not obj.is_quantized and obj.device.type != "meta":
            tensor = obj.detach().cpu().contiguous().reshape(-1)
            digest.update(tensor.view(torch.uint8).numpy())  # the raw bytes, whatever the dtype
    elif obj is None or isinstance(obj, (bool, int, str, bytes, torch.dtype, torch.device)):
        value = obj if isinstance(obj, bytes) else str(obj).encode("utf-8", "surrogatepass")
        digest.update(f"{type(obj).__name__} {len(value)}:".encode() + value)
    elif isinstance(obj, float):
        digest.update(f"float {obj.hex()}".encode())  # exact, unlike a rounded repr
    elif isinstance(obj, dict):
        entries = sorted(
            _canonical_digest(key, where) + _canonical_digest(value, f"{where}[{key!r}]") for key, value in obj.items()
        )
        digest.update(f"dict {len(entries)}:".encode() + b"".join(entries))
    elif isinstance(obj, (set, frozenset)):
        entries = sorted(_canonical_digest(value, f"{where}{{...}}") for value in obj)
        digest.update(f"{type(obj).__name__} {len(entries)}:".encode() + b"".join(entries))
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__} {len(obj)}:".encode())
        for index, value in enumerate(obj):
            digest.update(_canonical_digest(value, f"{where}[{index}]"))
    else:
        raise TypeError(
            f"{where} holds a {type(obj).__name__}, which a checkpoint cannot hold (tensors, numbers, "
            "strings and their lists, tuples, dicts and sets only): convert it in its state_dict()"
        )
    return digest.digest()


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
    raises a :class:`~torchrl_glam.storage.StorageError` (an ``OSError``) that says so and names the file."""
    run_dir = Path(run_dir)
    make_folder(run_dir)
    remove_stale_temporaries(run_dir)
    path = checked_path(run_dir / CHECKPOINT_NAME)  # the files are replaced, never written through a link
    checked_path(run_dir / PREVIOUS_NAME)
    plain = _to_plain(state)
    digest = content_digest(plain)  # before anything is written: a value no checkpoint holds raises here
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({**plain, DIGEST_KEY: digest}, f)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.replace(path, run_dir / PREVIOUS_NAME)  # a kill between the renames: prev is read
            record_written(run_dir / PREVIOUS_NAME)
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
        record_written(path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        code = _out_of_space(err)
        if code is not None:
            raise StorageError(
                f"{os.strerror(code)} while writing {path}: free space (or raise the quota or file-size "
                "limit) there (the previous checkpoint is intact), then continue with --resume",
                code,
            ) from None
        raise
    return path


#: Write failures for want of room: a full disk, a quota, a file-size limit (``ulimit -f``).
_OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _out_of_space(err: BaseException) -> int | None:
    # torch's zip writer reports these as a RuntimeError ("unexpected pos ..."), the file's OSError
    # only as its context, or carrying the C library's text
    for seen in error_chain(err):
        if getattr(seen, "errno", None) in _OUT_OF_SPACE:
            return seen.errno
        code = next((code for code in _OUT_OF_SPACE if os.strerror(code) in str(seen)), None)
        if code is not None:
            return code
    return None


def _verified(path: Path, plain) -> dict:
    """``plain`` without its digest; raises a :class:`CheckpointError` when the digest disagrees."""
    if not isinstance(plain, dict):
        raise CheckpointError(
            f"{path} holds a {type(plain).__name__}, not a checkpoint's dict: "
            "it is corrupted or not a torchrl_glam checkpoint"
        )
    plain = dict(plain)
    if DIGEST_0_2_KEY in plain and DIGEST_KEY not in plain:
        raise CheckpointVersionError(written_by(str(path), "checkpoint_digest_0_2", f"its digest {DIGEST_0_2_KEY}"))
    saved = plain.pop(DIGEST_KEY, None)
    try:
        matches = saved is None or saved == content_digest(plain)
    except TypeError as err:  # a value the writer never saves: not a torchrl_glam checkpoint
        raise CheckpointError(f"{path} is not a torchrl_glam checkpoint: {err}") from None
    if not matches:
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
        return _read(path)
    except (UnsafeCheckpointError, CheckpointVersionError):
        raise  # a crafted file or another version's is not a torn write: no fallback
    except CheckpointError as err:
        if not previous.exists():
            raise CheckpointError(
                f"{err}. No readable previous checkpoint ({previous.name}) to fall back to: "
                f"start again without --resume in a new --run-dir (or with --overwrite in {run_dir})."
            ) from None
        try:
            state = _read(previous)
        except (UnsafeCheckpointError, CheckpointVersionError):
            raise
        except CheckpointError as previous_err:
            raise CheckpointError(
                f"both checkpoints of {run_dir} are unreadable: {err}; and {previous_err}. Nothing can be "
                f"resumed from them: start again without --resume in a new --run-dir (or with --overwrite in {run_dir})"
            ) from None
        warnings.warn(
            f"{err}; resuming from the previous checkpoint {previous} instead (the steps since then are replayed)",
            stacklevel=2,
        )
        logger.warning("%s; resuming from the previous checkpoint %s", err, previous)
        return state


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
