"""The ground floor: how every room of the package touches the disk outside a run dir.

One cache root (:func:`cache_root`: ``$TORCHRL_GLAM_CACHE`` or ``~/.cache/torchrl_glam``), one
inter-process lock (:func:`file_lock`), one atomic writer (:func:`write_atomic_file`), and one
way to say what went wrong with a folder (:class:`StorageError`: a full disk, a read-only or
missing folder, a file where a folder should be, a symbolic link where a file is written). Nothing
here follows a symbolic link when it writes. The run dir's own writer (``training/rundir.py``)
adds its record of what a run wrote on top of these.
"""

from torchrl_glam.storage.files import (
    CACHE_FIX,
    CACHE_VARIABLE,
    StorageError,
    cache_root,
    error_chain,
    file_lock,
    is_disk_full,
    link_error,
    make_folder,
    open_no_follow,
    remove_stale,
    storage_error,
    write_atomic_file,
)

__all__ = [
    "CACHE_FIX",
    "CACHE_VARIABLE",
    "StorageError",
    "cache_root",
    "error_chain",
    "file_lock",
    "is_disk_full",
    "link_error",
    "make_folder",
    "open_no_follow",
    "remove_stale",
    "storage_error",
    "write_atomic_file",
]
