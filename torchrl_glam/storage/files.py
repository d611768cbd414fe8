"""The cache root, inter-process locks, atomic writes and their errors (see the package's docstring)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

#: The environment variable that chooses the cache (offline models, TextWorld's games, benchmarks)
CACHE_VARIABLE = "TORCHRL_GLAM_CACHE"
#: What a cache error tells the user to do
CACHE_FIX = f"set {CACHE_VARIABLE} to a writable folder to use another cache"
#: The message of a full disk, as the C library and the tools it runs write it
DISK_FULL_TEXT = "No space left on device"


class StorageError(OSError):
    """A folder or file the package cannot use as asked: the message names it, the cause (a full
    disk, no permission, a link, a file where a folder should be) and the fix. An ``OSError`` (with
    the system's ``errno`` where there is one) whose text is the message alone."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


def cache_root() -> Path:
    """The cache: ``$TORCHRL_GLAM_CACHE``, or ``~/.cache/torchrl_glam``. A file there is refused,
    naming the variable (nothing could be built under it)."""
    root = Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "torchrl_glam")
    if root.exists() and not root.is_dir():
        raise StorageError(f"the cache {root} is a file, not a folder: {CACHE_FIX}")
    return root


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what it was raised from or while handling, each once: torch's writer, for
    one, raises a RuntimeError on a full disk whose file error is only its context."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def is_disk_full(error: BaseException | str) -> bool:
    """Whether ``error`` (an exception, any error chained to it, or a tool's output) is a full disk."""
    if isinstance(error, str):
        return DISK_FULL_TEXT in error
    return any(
        (isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT))
        or DISK_FULL_TEXT in str(seen)
        or "ENOSPC" in str(seen)
        for seen in error_chain(error)
    )


def storage_error(error: BaseException, path: str | os.PathLike, fix: str = "") -> StorageError:
    """A :class:`StorageError` saying why ``path`` could not be written (``error``: what the system
    raised) and ``fix`` (what to do besides the cause's own remedy)."""
    if isinstance(error, StorageError):
        return error
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    tail = f"; {fix}" if fix else ""
    code = getattr(error, "errno", None)
    if is_disk_full(error):
        return StorageError(f"disk full at {folder} (writing {path.name}): free space there{tail}", errno.ENOSPC)
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return StorageError(f"cannot write in {folder} ({os.strerror(code)}): make it writable{tail}", code)
    if code == errno.ENOTDIR:
        return StorageError(f"cannot write {path}: a file stands where a folder of that path should be{tail}", code)
    if code == errno.EISDIR:
        return StorageError(f"cannot write {path}: a folder stands where that file should be; remove it{tail}", code)
    if code == errno.ELOOP or (path.is_symlink() and code in (errno.EEXIST, None)):
        return link_error(path)
    reason = getattr(error, "strerror", None) or str(error)
    return StorageError(f"cannot write {path} ({reason}){tail}", code)


def link_error(path: Path) -> StorageError:
    target = os.readlink(path) if path.is_symlink() else "?"
    return StorageError(
        f"{path} is a symbolic link (to {target}): torchrl_glam writes only inside its own folders, never "
        "through links. Remove the link (copy the file in its place if you need it), then run again."
    )


def open_no_follow(path: str | os.PathLike, flags: int, fix: str = "") -> int:
    """``os.open`` that never follows a symbolic link at ``path`` (a link, even a dangling one, is
    refused) and turns the system's errors into a :class:`StorageError`."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if os.path.islink(path):
            raise link_error(Path(path)) from None
        raise storage_error(error, path, fix) from None


def make_folder(folder: Path, fix: str = "") -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise storage_error(error, folder, fix) from None
    if folder.is_symlink() and not folder.resolve().is_dir():
        raise link_error(folder)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, waiting: str | None = None, fix: str = "") -> Iterator[None]:
    """An exclusive ``fcntl.flock`` on the lock file ``path``, for the ``with`` block.

    The kernel drops the lock when its holder exits, however it exits, so a killed holder never
    leaves a stale lock (NFS v4 supports it: Slurm nodes sharing a home wait for each other too).
    ``waiting``: logged once when another process holds it (what this one waits for). The lock file
    is opened without following a link; a folder that cannot hold it raises a
    :class:`StorageError` ending with ``fix``. Where ``fcntl`` does not exist (Windows) there is no
    lock: the atomic renames still keep every file whole.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = Path(path)
    make_folder(path.parent, fix)
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT, fix)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                logger.warning("%s", waiting)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_atomic_file(path: str | os.PathLike, data: str | bytes, fix: str = "") -> None:
    """Writes ``path`` through a temporary file beside it and a rename: a kill leaves the old file
    or the new one, never half of one; a link at ``path`` is refused (never replaced or followed);
    a full disk or a read-only folder raises a :class:`StorageError`."""
    path = Path(path)
    if path.is_symlink():
        raise link_error(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as error:
        raise storage_error(error, path, fix) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


def remove_stale(folder: Path, pattern: str) -> list[Path]:
    """Removes what ``pattern`` matches in ``folder`` (the staging folders of builds that were
    killed; call it holding the lock their builders hold, so none is in use). Links are unlinked,
    never followed."""
    removed = []
    for stale in sorted(folder.glob(pattern)):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
        removed.append(stale)
    return removed
