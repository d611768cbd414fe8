"""One run, one directory, one live process: what a run does to its ``run_dir`` before it trains.

* Without ``--resume``, a run dir that already holds a run (checkpoint, logs, evaluations) is
  refused, naming ``--resume`` and a fresh ``--run-dir``; ``--overwrite`` clears it first.
* Every file a run writes goes through one writer (:func:`write_atomic`, :func:`append_line`,
  :func:`record_written` for what a library writes), which records it in ``.torchrl_glam_written``.
  ``--overwrite`` deletes exactly what that record lists and nothing else: a directory that also
  holds anything no run wrote is refused, naming those entries, and nothing is deleted.
* Nothing is written through a symbolic link: a link planted where a run writes (any name a run
  writes, any path of the record) is refused before the run starts, and the writer refuses a link
  at the file or at any folder between it and the run dir.
* The run dir is locked against a second live process with ``fcntl.flock`` on ``run_dir/.lock``:
  the kernel releases the lock when the process dies (kill -9 included), so a lock is never stale.
  Within one process the lock is re-entrant (tests and the Slurm job call ``main`` repeatedly in
  one process) and is held until the process exits.
* Data-parallel ranks share the run dir: rank 0 locks and clears; every rank checks (read only,
  before any collective), so a refusal stops every rank instead of leaving them waiting.
* On resume, log rows written after the checkpoint's step are removed (the resumed run writes them
  again), and what the resume changed is recorded in ``run_dir/events.jsonl``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from pathlib import Path

from torchrl_glam import storage
from torchrl_glam.storage import StorageError

LOCK_NAME = ".lock"
EVENTS_NAME = "events.jsonl"
MARKER_NAME = ".torchrl_glam_run.json"
#: What makes a directory hold a run (the launcher's launch.json and the lock file do not).
RUN_CONTENT = (
    "checkpoint.pt",
    "checkpoint.prev.pt",
    "config.json",
    "evaluations.jsonl",
    "logs",
    "tensorboard",
    EVENTS_NAME,
)
WRITTEN_NAME = ".torchrl_glam_written"
#: Every name a run writes at the top of its run dir (rank<k>/ and temporaries: see is_artifact);
#: tests/reliability/test_run_files.py checks it against what a real run writes.
ARTIFACTS = RUN_CONTENT + (
    "autotelic.jsonl",
    "wandb",
    "environment.json",
    "report.md",
    "report.png",
    LOCK_NAME,
    MARKER_NAME,
    WRITTEN_NAME,
    "launch.json",
)

logger = logging.getLogger(__name__)
_held: dict[str, int] = {}  # resolved run dir -> file descriptor holding its lock


class RunDirError(StorageError, RuntimeError):
    """A run dir that this run may not use as asked (a RuntimeError, as before 0.4, and a
    :class:`~torchrl_glam.storage.StorageError`)."""


def existing_run_content(run_dir: str | os.PathLike) -> list[str]:
    run_dir = Path(run_dir)
    return (
        [name for name in RUN_CONTENT if (run_dir / name).exists()]
        + sorted(p.name for p in run_dir.glob("rank*") if p.is_dir())
        if run_dir.exists()
        else []
    )


def is_artifact(name: str) -> bool:
    """Whether a run writes an entry of this name at the top of its run dir."""
    return (
        name in ARTIFACTS
        or (name.startswith("rank") and name[4:].isdigit())
        or (name.startswith(".") and name.endswith(".tmp"))
    )


def refuse_links(run_dir: str | os.PathLike) -> None:
    """Raises naming the first symbolic link among what a run writes in ``run_dir`` (writing
    through it would change a file outside the run dir): the names a run writes, everything below
    them, and every path its record lists."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    for entry in sorted(run_dir.iterdir()):
        if not is_artifact(entry.name):
            continue
        if entry.is_symlink():
            _refuse_link(entry)
        if entry.is_dir():
            for folder, dirs, files in os.walk(entry):  # os.walk does not descend into links
                for name in dirs + files:
                    if os.path.islink(os.path.join(folder, name)):
                        _refuse_link(Path(folder) / name)
    for relative in sorted(written_entries(run_dir)):
        _refuse_links_on_the_way(run_dir, run_dir / relative)


def _refuse_link(path: Path) -> None:
    raise RunDirError(
        f"{path} is a symbolic link (to {os.readlink(path)}): a run writes only inside its run dir, "
        "never through links. Remove the link (copy the file in its place if you need it), then run again."
    )


def _refuse_links_on_the_way(root: Path, path: Path) -> None:
    """Refuses a link at ``path`` or at any folder between ``root`` (a folder above it) and it."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            _refuse_link(current)


def _run_root(path: Path) -> Path | None:
    """The run dir holding ``path``: the nearest folder above it with the run marker."""
    for folder in path.parents:
        if (folder / MARKER_NAME).exists():
            return folder
    return None


#: Per run dir, what this process has recorded already (the record is appended to once per path).
_recorded: dict[str, set[str]] = {}


def written_entries(run_dir: str | os.PathLike) -> set[str]:
    """What runs recorded writing in ``run_dir``, relative: a file; a folder a run created
    (ending in ``/``: removed by ``--overwrite`` once empty); a folder a library fills with files of
    its own naming (ending in ``/**``: all of it the run's)."""
    path = Path(run_dir) / WRITTEN_NAME
    if not path.is_file() or path.is_symlink():
        return set()
    entries, outside = set(), []
    for line in path.read_text(errors="replace").splitlines():
        if not line:
            continue
        # a tampered record: an entry outside the run dir is never followed nor removed
        if line.startswith("/") or ".." in line.split("/") or "\x00" in line:
            outside.append(line)
        else:
            entries.add(line)
    if outside and str(path) not in _warned_records:
        _warned_records.add(str(path))
        logger.warning(
            "%s lists %d entr%s outside its run dir (e.g. %r): ignored, never followed nor removed",
            path,
            len(outside),
            "y" if len(outside) == 1 else "ies",
            outside[0],
        )
    return entries


#: The records whose entries outside their run dir were warned of (once per process)
_warned_records: set[str] = set()


#: How :func:`record_written` marks a folder: one the run created, one a library fills.
CREATED_FOLDER, LIBRARY_FOLDER = "/", "/**"


def record_written(path: str | os.PathLike, folder: str = "") -> None:
    """Records ``path`` as written by the run whose run dir holds it (``folder``: ``""`` for a file,
    :data:`CREATED_FOLDER` or :data:`LIBRARY_FOLDER`); outside a run dir, records nothing."""
    path = Path(path)
    _record(_run_root(path), path, folder)


def _record(root: Path | None, path: Path, folder: str = "") -> None:
    if root is None:
        return
    entry = path.relative_to(root).as_posix() + folder
    seen = _recorded.setdefault(str(root.resolve()), set())
    if entry in seen:
        return
    if not seen:
        seen.update(written_entries(root))
    if entry not in seen:
        _append(root / WRITTEN_NAME, entry + "\n")
        seen.add(entry)


def open_no_follow(path: str | os.PathLike, flags: int) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` with a :class:`RunDirError`, and a full
    disk or a folder it cannot write in with a :class:`~torchrl_glam.storage.StorageError` naming it."""
    if os.path.islink(path):
        _refuse_link(Path(path))
    return storage.open_no_follow(path, flags)  # a link made since is refused there too


def _append(path: Path, line: str) -> None:
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        with os.fdopen(fd, "a") as f:
            f.write(line)
    except OSError as error:
        raise storage.storage_error(error, path) from None


def checked_path(path: str | os.PathLike) -> Path:
    """``path`` once no link lies on its way from its run dir (or at it, outside a run dir)."""
    return _checked(Path(path))[0]


def _checked(path: Path) -> tuple[Path, Path | None]:
    """``path`` (checked as :func:`checked_path` does) and its run dir, ``None`` outside one."""
    root = _run_root(path)
    _refuse_links_on_the_way(root if root is not None else path.parent, path)
    return path, root


def append_line(path: str | os.PathLike, line: str) -> None:
    """Appends ``line`` (one JSON line of a log) to ``path``, never through a link, and records it."""
    path, root = _checked(Path(path))
    _append(path, line)
    _record(root, path)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Writes ``path`` through a temporary file and a rename: a kill leaves the old file or the new
    one, never half of one. A link at ``path`` or on its way is refused; the file is recorded."""
    path, root = _checked(Path(path))
    storage.write_atomic_file(path, data)
    _record(root if root is not None else _run_root(path), path)  # the marker itself creates the root


def lock_run_dir(run_dir: str | os.PathLike) -> None:
    """Takes the run dir's lock or raises naming the process holding it."""
    run_dir = Path(run_dir)
    storage.make_folder(run_dir)
    key = str(run_dir.resolve())
    if key in _held:
        return
    fd = open_no_follow(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise RunDirError(
            f"{run_dir} is in use by another live process ({owner}): two runs in one directory "
            "would mix their checkpoints and logs. Wait for it to end, or use another --run-dir."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}\n".encode(), 0)
    _held[key] = fd


def release_run_dir(run_dir: str | os.PathLike) -> None:
    fd = _held.pop(str(Path(run_dir).resolve()), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


def _mark_run_dir(run_dir: Path, preset: str | None, fresh: bool) -> None:
    """Writes the marker (what makes a folder a run dir) with the preset the run starts from; a
    resume keeps the preset the run was started with."""
    if fresh or not (run_dir / MARKER_NAME).exists():
        marker = {"created_by": "torchrl_glam", **({"preset": preset} if preset else {})}
        write_atomic(run_dir / MARKER_NAME, json.dumps(marker) + "\n")


def started_preset(run_dir: str | os.PathLike) -> str | None:
    """The preset the run in ``run_dir`` was started with: its marker's, or its launch.json's
    (the launcher's record); ``None`` when neither says (a run of torchrl_glam before 0.4)."""
    for name in (MARKER_NAME, "launch.json"):
        path = Path(run_dir) / name
        try:
            preset = json.loads(path.read_text()).get("preset") if path.is_file() and not path.is_symlink() else None
        except (OSError, ValueError, AttributeError):
            preset = None
        if isinstance(preset, str) and preset:
            return preset
    return None


def _kept_on_overwrite(name: str) -> bool:
    return name in (LOCK_NAME, MARKER_NAME, "launch.json")


def _own(relative: str, written: set[str]) -> bool:
    """Whether a run wrote this file (or folder: one a library fills) of its run dir."""
    parts = relative.split("/")
    return relative in written or any("/".join(parts[:k]) + LIBRARY_FOLDER in written for k in range(1, len(parts) + 1))


def overwrite_removals(run_dir: str | os.PathLike) -> list[str]:
    """The paths (relative) ``--overwrite`` removes from ``run_dir``: exactly what its record says
    runs wrote. Raises, deleting nothing, when it also holds entries that no run wrote."""
    run_dir = Path(run_dir)
    written = written_entries(run_dir) | {WRITTEN_NAME}
    removals, foreign = [], []
    for folder, dirs, files in os.walk(run_dir):
        top, walk_into = Path(folder) == run_dir, []
        for name in sorted(dirs + files):
            path = Path(folder) / name
            relative = path.relative_to(run_dir).as_posix()
            if top and (_kept_on_overwrite(name) or (name.startswith(".") and name.endswith(".tmp"))):
                continue
            own = _own(relative, written)
            if name in dirs and not own and not path.is_symlink():
                walk_into.append(name)  # a folder no record claims whole: its entries decide
            else:
                (removals if own else foreign).append(relative)
        dirs[:] = walk_into
    if foreign:
        shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more" if len(foreign) > 10 else "")
        raise RunDirError(
            f"--overwrite refused: {run_dir} holds {shown}, which no run wrote (the run's record, "
            f"{WRITTEN_NAME}, does not list it), and --overwrite deletes only a run's own files. Nothing was "
            "deleted. Choose a fresh --run-dir for the run, or move those entries out of it first."
        )
    return removals


def clear_run_dir(run_dir: str | os.PathLike) -> list[str]:
    """Removes a previous run's files (see :func:`overwrite_removals`), then the folders a run
    created that are left empty; returns what was removed. Links are removed, never followed."""
    run_dir = Path(run_dir)
    created = [entry[:-1] for entry in written_entries(run_dir) if entry.endswith(CREATED_FOLDER)]
    removals = overwrite_removals(run_dir)
    for relative in removals:
        path = run_dir / relative
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    emptied = {str(Path(r).parent) for r in removals} | set(created)
    for relative in sorted(emptied - {"."}, key=lambda r: r.count("/"), reverse=True):
        folder = run_dir / relative
        while folder != run_dir and folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
            removals.append(folder.relative_to(run_dir).as_posix() + "/")
            folder = folder.parent
    _recorded.pop(str(run_dir.resolve()), None)
    return removals


def prepare_run_dir(
    run_dir: str | os.PathLike, resume: bool, overwrite: bool = False, rank: int = 0, preset: str | None = None
) -> None:
    """Refuses, clears and locks ``run_dir`` as the module docstring says; call before training.
    ``preset``: the one the run starts from, recorded for a later resume (:func:`started_preset`)."""
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite contradict each other: choose one")
    if not str(run_dir).strip():
        raise RunDirError("run_dir is empty (it would mean the current folder): pass --run-dir DIR")
    content = existing_run_content(run_dir)
    if content and not resume and not overwrite:
        raise RunDirError(
            f"{run_dir} already holds a run ({', '.join(content)}). To continue it, add --resume; "
            "to start a new run, choose a fresh --run-dir; to discard it, add --overwrite."
        )
    refuse_links(run_dir)
    if overwrite and content:
        overwrite_removals(run_dir)  # refuses before anything is created or deleted
    if rank != 0:
        return
    run_dir = Path(run_dir)
    lock_run_dir(run_dir)
    _mark_run_dir(run_dir, preset, fresh=not content or overwrite)
    if overwrite and content:
        record_event(run_dir, "overwrite", removed=clear_run_dir(run_dir))


def record_event(run_dir: str | os.PathLike, event: str, **fields) -> None:
    """Appends one line to ``run_dir/events.jsonl`` (resumes, overwrites, divergence)."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    append_line(
        Path(run_dir) / EVENTS_NAME,
        json.dumps({"event": event, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields}, default=str) + "\n",
    )


def truncate_logs(run_dir: str | os.PathLike, env_steps: int) -> int:
    """Removes CSV-logger rows and ``evaluations.jsonl`` lines after ``env_steps`` (the step a
    resume continues from: those rows are written again). Returns how many were removed.
    TensorBoard event files are not rewritten (TensorBoard shows the newest value of a step)."""
    run_dir, removed = Path(run_dir), 0
    for path in sorted((run_dir / "logs").rglob("*.csv")) if (run_dir / "logs").exists() else []:
        lines = path.read_text().splitlines(keepends=True)
        kept = [line for line in lines if _csv_step(line) is None or _csv_step(line) <= env_steps]
        if len(kept) != len(lines):
            removed += len(lines) - len(kept)
            _rewrite(path, kept)
    evaluations = run_dir / "evaluations.jsonl"
    if evaluations.exists():
        lines = evaluations.read_text().splitlines(keepends=True)
        kept = []
        for line in lines:
            try:
                if json.loads(line)["env_steps"] > env_steps:
                    continue
            except (ValueError, KeyError, TypeError):
                continue  # a torn line (a kill while writing): drop it
            kept.append(line if line.endswith("\n") else line + "\n")
        if kept != lines:
            removed += len(lines) - len(kept)
            _rewrite(evaluations, kept)
    return removed


def _csv_step(line: str) -> float | None:
    try:
        return float(line.split(",", 1)[0])
    except ValueError:
        return None


def _rewrite(path: Path, lines: list[str]) -> None:
    write_atomic(path, "".join(lines))
