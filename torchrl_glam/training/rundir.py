"""One run, one directory, one live process: what a run does to its ``run_dir`` before it trains.

* Without ``--resume``, a run dir that already holds a run (checkpoint, logs, evaluations) is
  refused, naming ``--resume`` and a fresh ``--run-dir``; ``--overwrite`` clears it first.
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
import time
from pathlib import Path

LOCK_NAME = ".lock"
EVENTS_NAME = "events.jsonl"
#: What makes a directory hold a run (the launcher's launch.json and the lock file do not).
RUN_CONTENT = ("checkpoint.pt", "checkpoint.prev.pt", "config.json", "evaluations.jsonl", "logs",
               "tensorboard", EVENTS_NAME)

_held: dict[str, int] = {}  # resolved run dir -> file descriptor holding its lock


class RunDirError(RuntimeError):
    """A run dir that this run may not use as asked."""


def existing_run_content(run_dir: str | os.PathLike) -> list[str]:
    run_dir = Path(run_dir)
    return [name for name in RUN_CONTENT if (run_dir / name).exists()] + sorted(
        p.name for p in run_dir.glob("rank*") if p.is_dir()) if run_dir.exists() else []


def lock_run_dir(run_dir: str | os.PathLike) -> None:
    """Takes the run dir's lock or raises naming the process holding it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = str(run_dir.resolve())
    if key in _held:
        return
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
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


def clear_run_dir(run_dir: str | os.PathLike) -> None:
    """Removes everything of a previous run (keeps the lock file and the launcher's launch.json)."""
    for path in Path(run_dir).iterdir():
        if path.name in (LOCK_NAME, "launch.json"):
            continue
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def prepare_run_dir(run_dir: str | os.PathLike, resume: bool, overwrite: bool = False, rank: int = 0) -> None:
    """Refuses, clears and locks ``run_dir`` as the module docstring says; call before training."""
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite contradict each other: choose one")
    content = existing_run_content(run_dir)
    if content and not resume and not overwrite:
        raise RunDirError(
            f"{run_dir} already holds a run ({', '.join(content)}). To continue it, add --resume; "
            "to start a new run, choose a fresh --run-dir; to discard it, add --overwrite."
        )
    if rank != 0:
        return
    lock_run_dir(run_dir)
    if overwrite and content:
        clear_run_dir(run_dir)
        record_event(run_dir, "overwrite", removed=content)


def record_event(run_dir: str | os.PathLike, event: str, **fields) -> None:
    """Appends one line to ``run_dir/events.jsonl`` (resumes, overwrites, divergence)."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(run_dir) / EVENTS_NAME, "a") as f:
        f.write(json.dumps({"event": event, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields},
                           default=str) + "\n")


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
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(lines))
    os.replace(tmp, path)
