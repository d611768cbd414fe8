"""One run, one directory, one live process: what a run does to its ``run_dir`` before it trains.

* Without ``--resume``, a run dir that already holds a run (checkpoint, logs, evaluations) is
  refused, naming ``--resume`` and a fresh ``--run-dir``; ``--overwrite`` clears it first.
* ``--overwrite`` deletes only what runs write (:data:`ARTIFACTS`), unless the project created the
  directory itself (``.torchrl_glam_run.json`` says so), where everything in it came from runs or
  was put there for them. A directory that also holds anything else is refused, nothing deleted.
* Nothing is written through a symbolic link: a link planted where the run writes is refused
  before the run starts, and the run's own writes open files with ``O_NOFOLLOW`` or replace them.
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
import os
import shutil
import tempfile
import time
from pathlib import Path

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
#: Every name a run writes at the top of its run dir (rank<k>/ and temporaries: see is_artifact).
ARTIFACTS = RUN_CONTENT + ("environment.json", "autotelic.jsonl", "wandb", LOCK_NAME, MARKER_NAME, "launch.json")

_held: dict[str, int] = {}  # resolved run dir -> file descriptor holding its lock


class RunDirError(RuntimeError):
    """A run dir that this run may not use as asked."""


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
    through it would change a file outside the run dir)."""
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


def _refuse_link(path: Path) -> None:
    raise RunDirError(
        f"{path} is a symbolic link (to {os.readlink(path)}): a run writes only inside its run dir, "
        "never through links. Remove the link (copy the file in its place if you need it), then run again."
    )


def open_no_follow(path: str | os.PathLike, flags: int) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` with a :class:`RunDirError`."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if os.path.islink(path):
            _refuse_link(Path(path))
        raise OSError(err.errno, f"{err.strerror} while writing {path}") from err


def append_line(path: str | os.PathLike, line: str) -> None:
    """Appends ``line`` (one JSON line of a log) to ``path``, never through a link."""
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a") as f:
        f.write(line)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes ``path`` through a temporary file and a rename: a kill leaves the old file or the new
    one, never half of one, and a link at ``path`` is replaced, not written through."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def lock_run_dir(run_dir: str | os.PathLike) -> None:
    """Takes the run dir's lock or raises naming the process holding it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
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


def created_by_a_run(run_dir: str | os.PathLike) -> bool:
    """Whether the project found ``run_dir`` missing or empty when it first used it (its marker)."""
    try:
        return json.loads((Path(run_dir) / MARKER_NAME).read_text()).get("created_by_run") is True
    except (OSError, ValueError, AttributeError):
        return False


def _mark_run_dir(run_dir: Path, created_by_run: bool) -> None:
    if not (run_dir / MARKER_NAME).exists():
        write_atomic(run_dir / MARKER_NAME, json.dumps({"created_by_run": created_by_run}) + "\n")


def _kept_on_overwrite(name: str) -> bool:
    return name in (LOCK_NAME, MARKER_NAME, "launch.json")


def overwrite_removals(run_dir: str | os.PathLike) -> list[str]:
    """The names ``--overwrite`` removes from ``run_dir``; raises, deleting nothing, when it also
    holds entries that no run wrote in a directory the project did not create."""
    names = sorted(p.name for p in Path(run_dir).iterdir() if not _kept_on_overwrite(p.name))
    foreign = [name for name in names if not is_artifact(name)]
    if foreign and not created_by_a_run(run_dir):
        raise RunDirError(
            f"--overwrite refused: {run_dir} holds {', '.join(foreign)}, which no run wrote, and "
            "--overwrite deletes only a run's own files. Nothing was deleted. Choose a fresh "
            "--run-dir for the run, or move those entries out of it first."
        )
    return names


def clear_run_dir(run_dir: str | os.PathLike) -> list[str]:
    """Removes a previous run's files (see :func:`overwrite_removals`); returns their names.
    Links are removed, never followed."""
    names = overwrite_removals(run_dir)
    for name in names:
        path = Path(run_dir) / name
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return names


def prepare_run_dir(run_dir: str | os.PathLike, resume: bool, overwrite: bool = False, rank: int = 0) -> None:
    """Refuses, clears and locks ``run_dir`` as the module docstring says; call before training."""
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
    fresh = not run_dir.exists() or all(_kept_on_overwrite(p.name) for p in run_dir.iterdir())
    lock_run_dir(run_dir)
    _mark_run_dir(run_dir, created_by_run=fresh)
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
