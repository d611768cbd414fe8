"""How long a training script takes to answer ``--help`` or refuse a bad command line, against an
older commit.

    python -m torchrl_glam.benchmarks.startup [--repeats 5]
    python -m torchrl_glam.benchmarks.startup --compare 03937e0 [--repeats 5] [--keep-worktree]

Each command (``examples/sac_glam.py --help``, ``examples/sac_glam.py nosuchfield=1``,
``examples/sac_glam.py batch_size=abc``, ``examples/ppo_glam.py --help``, and two refusals that
need an environment's metadata: ``goals=nosuchset`` for Playground-Text, ``--preset cpu_babyai
goals=nosuch`` for BabyAI-Text) runs ``--repeats`` times as a fresh subprocess
(``OMP_NUM_THREADS=1``, ``PYTHONPATH`` = the tree, from the tree's root); the wall seconds from its
start to its exit are timed, and their median printed. None should wait for torch and TorchRL to
import (``torchrl_glam/training/cli.py``; the environments' metadata imports without them).

With ``--compare COMMIT``: COMMIT is checked out in a detached git worktree outside the repository
(as ``python -m torchrl_glam.benchmarks.training --compare`` does), the two trees alternate (the
baseline first in odd repeats and second in even ones, so that a drift of the machine's load does
not favour one side), and each command's medians are printed with their ratio current/baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: (command line after ``python``, its expected exit code): what is timed.
COMMANDS = (
    (("examples/sac_glam.py", "--help"), 0),
    (("examples/sac_glam.py", "nosuchfield=1"), 2),
    (("examples/sac_glam.py", "batch_size=abc"), 2),
    (("examples/ppo_glam.py", "--help"), 0),
    # values only the environment can check (its goal sets): its metadata loads, not torch
    (("examples/sac_glam.py", "goals=nosuchset"), 2),
    (("examples/sac_glam.py", "--preset", "cpu_babyai", "goals=nosuch"), 2),
)


def _environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def check_tree(tree: Path) -> None:
    """Refuses a tree whose subprocesses would import ``torchrl_glam`` from elsewhere (an editable
    install of another checkout ahead of ``PYTHONPATH``)."""
    done = subprocess.run(
        [sys.executable, "-c", "import torchrl_glam; print(torchrl_glam.__file__)"],
        cwd=tree,
        env=_environment(tree),
        capture_output=True,
        text=True,
    )
    found = Path(done.stdout.strip() or ".").resolve()
    if done.returncode or tree.resolve() not in found.parents:
        raise SystemExit(f"{tree}: its subprocesses import torchrl_glam from {found}, not from the tree\n{done.stderr}")


def time_command(tree: Path, argv: tuple[str, ...], exit_code: int) -> float:
    """Wall seconds of ``python ARGV`` in ``tree``, after checking it exited with ``exit_code``."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=tree, env=_environment(tree), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != exit_code:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise SystemExit(f"{tree}: python {' '.join(argv)} exited {done.returncode}, not {exit_code}:\n{tail}")
    return seconds


def measure(trees: dict[str, Path], repeats: int) -> dict[tuple[str, str], list[float]]:
    """(tree name, command) -> its wall seconds, ``repeats`` of each; the trees' order alternates."""
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(repeats):
        order = list(trees) if repeat % 2 == 0 else list(trees)[::-1]
        for argv, exit_code in COMMANDS:
            for name in order:
                times.setdefault((name, " ".join(argv)), []).append(time_command(trees[name], argv, exit_code))
    return times


def report(times: dict[tuple[str, str], list[float]], labels: dict[str, str]) -> list[str]:
    """One line per command: each tree's median seconds and, with two trees, current/baseline."""
    names = list(labels)
    width = max(len(" ".join(argv)) for argv, _ in COMMANDS)
    heads = {name: f"{name} ({labels[name]})" for name in names}
    lines = [f"{'command':<{width}}  " + "  ".join(f"{heads[n]:>{max(len(heads[n]), 9)}}" for n in names)]
    for argv, _ in COMMANDS:
        command = " ".join(argv)
        medians = {name: statistics.median(times[(name, command)]) for name in names}
        line = f"{command:<{width}}  " + "  ".join(f"{medians[n]:>{max(len(heads[n]), 9) - 2}.2f} s" for n in names)
        if "baseline" in medians:
            ratio = medians["current"] / medians["baseline"]
            line += f"   current/baseline {ratio:.3f} ({1 / ratio:.1f}x faster)"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", metavar="COMMIT", help="the baseline commit (e.g. 03937e0)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each command per tree (default 5)")
    parser.add_argument("--keep-worktree", action="store_true", help="keep the baseline's worktree for later runs")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    from torchrl_glam.benchmarks.training import CURRENT_TREE, _cache_root, _current_label, _git, baseline_worktree

    print(f"median wall seconds of {args.repeats} runs, each a fresh process (python {sys.version.split()[0]})")
    if args.compare is None:
        check_tree(CURRENT_TREE)
        times = measure({"current": CURRENT_TREE}, args.repeats)
        print("\n".join(report(times, {"current": _current_label()})))
        return
    with baseline_worktree(args.compare, args.keep_worktree, _cache_root()) as (tree, _):
        trees = {"baseline": tree, "current": CURRENT_TREE}
        labels = {"baseline": _git("rev-parse", "--short", "HEAD", cwd=tree), "current": _current_label()}
        for path in trees.values():
            check_tree(path)
        times = measure(trees, args.repeats)
    print("\n".join(report(times, labels)))


if __name__ == "__main__":
    main()
