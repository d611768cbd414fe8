"""What a run ran on: ``run_dir/environment.json``, written when a run starts.

Package versions, torch's build and threads, the CPU's model and the instruction sets that change
floating-point results (a kernel with AVX-512 sums in another order than one with AVX2), the GPU,
Python, the platform, and this project's git commit and whether its tree was dirty. A run is
bitwise reproducible only where all of these match; :func:`environment_changes` names what differs
(``--resume`` warns with it), :func:`environment_summary` is the report's line.

Reading a record needs no torch (the results tool reads it); :func:`current_environment` imports it.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from torchrl_glam.storage import StorageError

ENVIRONMENT_NAME = "environment.json"
#: the packages whose versions change a run's numbers or its code paths
PACKAGES = ("torch", "torchrl", "tensordict", "transformers", "peft", "numpy", "torchrl_glam")
#: /proc/cpuinfo flags that select other floating-point kernels (prefixes)
NUMERIC_FLAGS = ("avx512", "amx", "avx2", "fma")

__all__ = [
    "ENVIRONMENT_NAME",
    "current_environment",
    "environment_changes",
    "environment_summary",
    "read_environment",
]


def _version(package: str) -> str | None:
    if package == "torchrl_glam":  # the code that runs: a checkout on PYTHONPATH shadows any install's metadata
        from torchrl_glam import __version__

        return __version__
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu() -> dict:
    """The CPU's model name and numeric flags from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {"model": platform.processor() or None, "flags": None}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor's
    flags = sorted(f for f in fields.get("flags", "").split() if f.startswith(NUMERIC_FLAGS))
    return {"model": fields.get("model name") or platform.processor() or None, "flags": flags}


def _git(*args: str) -> str | None:
    """``git args`` in this package's source folder; ``None`` where git or the repository is absent."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def current_environment() -> dict:
    """This process's environment as ``environment.json`` records it (imports torch)."""
    import torch

    commit = _git("rev-parse", "HEAD")
    # tracked files only: the run folders a run writes inside a clone do not make it dirty; the
    # diff's hash tells a resume whether the uncommitted changes are still the same
    diff = _git("diff", "HEAD") if commit else None
    cuda = torch.cuda.is_available()
    return {
        "packages": {name: _version(name) for name in PACKAGES},
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "build": "CUDA" if torch.version.cuda else "ROCm" if torch.version.hip else "CPU",
            "threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels torch chose
        },
        "cpu": _cpu(),
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git": {
            "commit": commit,
            "dirty": None if diff is None else bool(diff),
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        },
        "command": sys.argv,
    }


def read_environment(run_dir: str | Path) -> dict | None:
    """A run folder's ``environment.json``, or ``None`` when it has none or it cannot be read."""
    try:
        record = json.loads((Path(run_dir) / ENVIRONMENT_NAME).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _part(record: dict, key: str) -> dict:
    """``record[key]`` where it is a mapping (a record edited by hand may hold anything there)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def environment_changes(old: dict, new: dict) -> list[str]:
    """What differs between two records that can change a run's numbers, e.g.
    ``["torch 2.13.0 -> 2.14.1", "CPU flags differ"]`` (empty when nothing does). A field of
    another type than the record writes counts as differing."""
    changes = []
    old_packages, new_packages = _part(old, "packages"), _part(new, "packages")
    for name in PACKAGES:
        if old_packages.get(name) != new_packages.get(name):
            changes.append(f"{name} {old_packages.get(name)} -> {new_packages.get(name)}")
    old_torch, new_torch = _part(old, "torch"), _part(new, "torch")
    for key, what in [("build", "torch build"), ("cuda", "CUDA"), ("threads", "torch threads")]:
        if old_torch.get(key) != new_torch.get(key):
            changes.append(f"{what} {old_torch.get(key)} -> {new_torch.get(key)}")
    if _part(old, "cpu").get("model") != _part(new, "cpu").get("model"):
        changes.append("CPU model differs")
    if _part(old, "cpu").get("flags") != _part(new, "cpu").get("flags"):
        changes.append("CPU flags differ")
    if old.get("gpu") != new.get("gpu"):
        changes.append(f"GPU {old.get('gpu')} -> {new.get('gpu')}")
    if old.get("python") != new.get("python"):
        changes.append(f"python {old.get('python')} -> {new.get('python')}")
    old_git, new_git = _part(old, "git"), _part(new, "git")
    if old_git.get("commit") != new_git.get("commit"):
        changes.append(f"commit {_short(old_git.get('commit'))} -> {_short(new_git.get('commit'))}")
    elif old_git.get("diff_sha256") != new_git.get("diff_sha256"):
        changes.append("uncommitted changes differ")
    return changes


def _short(commit) -> str | None:
    return commit[:7] if isinstance(commit, str) and commit else commit


def _flag_families(flags: list[str]) -> list[str]:
    """``["avx2", "avx512f", "avx512bw"]`` -> ``["avx2", "avx512 x2"]``: the summary's short form."""
    counts: dict[str, int] = {}
    for flag in flags:
        family = next((prefix for prefix in NUMERIC_FLAGS if flag.startswith(prefix)), flag)
        counts[family] = counts.get(family, 0) + 1
    return [family if n == 1 else f"{family} x{n}" for family, n in counts.items()]


def environment_summary(record: dict) -> str:
    """One line: ``torch 2.13.0 (CPU, 1 thread), torchrl 0.14.1, ..., CPU Xeon (AVX512 kernels), commit 1cf8c27``."""
    packages = record.get("packages", {})
    torch_info = record.get("torch", {})
    threads = torch_info.get("threads")
    build = f"{torch_info.get('build')}" + (f" {torch_info.get('cuda')}" if torch_info.get("cuda") else "")
    if torch_info.get("build") not in (None, "CPU") and not record.get("gpu"):
        build = f"CPU, a {build} build"  # a GPU build on a machine without a GPU runs on the CPU
    parts = [
        f"torch {packages.get('torch')} ({build}"
        + (f", {threads} thread{'s' if threads != 1 else ''})" if threads is not None else ")")
    ]
    parts += [f"{name} {packages.get(name)}" for name in PACKAGES[1:] if packages.get(name)]
    cpu = record.get("cpu", {})
    kernels = torch_info.get("cpu_capability")
    families = _flag_families(cpu.get("flags") or [])
    detail = ", ".join(([f"{kernels} kernels"] if kernels else []) + families)
    parts.append(f"CPU {cpu.get('model')}" + (f" ({detail})" if detail else ""))
    if record.get("gpu"):
        parts.append(f"GPU {record['gpu']}")
    parts.append(f"Python {record.get('python')} on {record.get('platform')}")
    git = record.get("git", {})
    if git.get("commit"):
        parts.append(f"commit {_short(git['commit'])}" + (" (dirty tree)" if git.get("dirty") else ""))
    else:
        parts.append("commit unknown (no git)")
    return ", ".join(parts)


def record_environment(run_dir: str | Path, resumed: bool) -> str | None:
    """Writes ``run_dir/environment.json`` (this process's); ``resumed`` (from a checkpoint): returns
    the one-line warning naming what changed since the record it replaces (also in ``events.jsonl``),
    or ``None``."""
    from torchrl_glam.training.rundir import record_event, write_atomic

    path = Path(run_dir) / ENVIRONMENT_NAME
    previous = read_environment(run_dir) if resumed else None
    current = current_environment()
    # compared before the record is replaced: the comparison is the point of a resume's record
    if previous is not None:
        changes = environment_changes(previous, current)
    elif resumed and (path.exists() or path.is_symlink()):
        changes = [f"the previous {ENVIRONMENT_NAME} cannot be read (not a JSON object), so what changed is unknown"]
    else:
        changes = []
    if path.is_dir() and not path.is_symlink():
        raise StorageError(
            f"{path} is a folder, where a run writes the record of what it ran on: move it out of the run dir, then "
            "run again"
        )
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(current, indent=1) + "\n")
    if not changes:
        return None
    record_event(run_dir, "environment_changed", changes=changes, previous=previous)
    return (
        f"warning: this resume runs elsewhere than the run so far ({', '.join(changes)}): "
        "resumed numbers are not bitwise those of an uninterrupted run"
    )
