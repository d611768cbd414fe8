"""Where the time of a SAC-GLAM run goes, and how fast its training loop is against an older commit.

    python -m torchrl_glam.benchmarks.training [--preset cpu] [--steps 2048] [field=value ...]
    python -m torchrl_glam.benchmarks.training --compare 52395e1 [--rounds 2] [--steps 3072]
        [--sets SET,SET] [--csv FILE] [--keep-worktree] [field=value ...]

Without ``--compare``: runs the SAC-GLAM training script for ``--steps`` environment steps with the
LLM scorer's forward and every backward pass timed, and prints the share of the training loop spent
outside them: environment steps, rendering, replay, HER, n-step, optimiser steps, logging (the goal
is at most 15%); then the loop's profile (``profile.py``): the environment, acting and the update's
forward apart, the backward, the encoder, the decoder, attention, and the padding of the LLM's input.

With ``--compare COMMIT``: env steps/s of this tree's loop against COMMIT's, as a ratio measured in
one run on the same machine. COMMIT is checked out in a detached git worktree outside the
repository; round by round, for each task set (``goals=...``), both trees run as subprocesses
(``OMP_NUM_THREADS`` = ``--threads``, ``PYTHONPATH`` = the tree), the baseline first in odd rounds
and second in even ones, so that a drift of the machine's load does not favour one side. Prints
each measurement, and per task set the median over rounds of the ratio current/baseline.

Both modes time the loop with ``loop_timer.py`` (this folder): from the first environment step to
the end of the last update; start-up is not counted, the final evaluation and checkpoint are
skipped. In ``--compare`` the current tree's ``loop_timer.py`` runs inside both trees, so both are
measured the same way whatever the baseline's own benchmark did.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from torchrl_glam.benchmarks import loop_timer
from torchrl_glam.benchmarks.profile import LoopProfile
from torchrl_glam.storage import cache_root, file_lock, remove_stale

CURRENT_TREE = Path(__file__).resolve().parents[2]
CSV_FIELDS = (
    "round",
    "task_set",
    "tree",
    "commit",
    "position",
    "steps",
    "loop_seconds",
    "steps_per_second",
    "steps_per_cpu_second",
    "startup_seconds",
    "llm_forward_seconds",
    "backward_seconds",
    "threads",
    "torchrl_glam_file",
)


def breakdown(args) -> None:
    """The in-process mode: the share of the loop inside and outside the LLM."""
    profile = LoopProfile()
    with profile.patches():
        result = loop_timer.time_training_loop(args.steps, args.preset, args.overrides, args.threads, profile=profile)
    loop, llm, backward = result["loop"], result["llm_forward"], result["backward"]
    other = loop - llm - backward
    print(
        f"{result['steps']} environment steps, training loop {loop:.1f} s ({result['steps_per_second']:.1f} steps/s), "
        f"{result['threads']} thread(s); start-up {result['startup']:.1f} s not counted, final evaluation and "
        "checkpoint skipped"
    )
    print(f"  LLM forward (acting and learning): {llm:6.1f} s  ({llm / loop:.0%})")
    print(f"  backward:                          {backward:6.1f} s  ({backward / loop:.0%})")
    print(f"  everything else:                   {other:6.1f} s  ({other / loop:.1%})  (goal: at most 15%)")
    print("where the loop's time goes:")
    print("\n".join(profile.table(loop)))


# ---- --compare: the baseline's worktree, the subprocesses, the rounds


def _git(*args: str, cwd: Path = CURRENT_TREE) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


def _current_label() -> str:
    """This tree's commit, with "+changes" when its working tree differs from it."""
    head = _git("rev-parse", "--short", "HEAD")
    return head + ("+changes" if _git("status", "--porcelain", "--untracked-files=no") else "")


def _cache_root() -> Path:
    return cache_root() / "benchmarks"


@contextmanager
def baseline_worktree(commit: str, keep: bool, cache_root: Path):
    """Yields ``(tree, workdir)``: a detached worktree of ``commit`` and a folder beside it (for the
    baseline's TORCH_EXTENSIONS_DIR). A worktree kept by an earlier ``--keep-worktree`` run is reused
    and left in place; otherwise one is made and removed at the end unless ``keep``."""
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=CURRENT_TREE, capture_output=True, text=True
    )
    if inside.returncode or inside.stdout.strip() != "true":
        raise SystemExit(f"--compare needs a git checkout of torchrl_glam; {CURRENT_TREE} is not one")
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        cwd=CURRENT_TREE,
        capture_output=True,
        text=True,
    )
    if found.returncode:
        raise SystemExit(
            f"--compare {commit}: no such commit in {CURRENT_TREE} (give a commit id, tag or "
            "branch of this repository; git fetch it first if it is only on a remote)"
        )
    sha = found.stdout.strip()
    kept = cache_root / sha[:12]
    if (kept / "tree").exists():
        found = _git("rev-parse", "HEAD", cwd=kept / "tree")
        if found != sha or _git("status", "--porcelain", cwd=kept / "tree"):
            raise SystemExit(
                f"{kept / 'tree'} should be a clean worktree of {sha} but is at {found} or has "
                f"changes: remove it (git worktree remove --force {kept / 'tree'}) and run again"
            )
        print(f"reusing the baseline worktree {kept / 'tree'} (kept by an earlier --keep-worktree run)")
        yield kept / "tree", kept
        return
    if keep:
        workdir = kept
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        cache_root.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}-", dir=cache_root))
    tree = workdir / "tree"
    try:  # --force: also where a kept worktree's folder was deleted by hand (git still lists it)
        _git("worktree", "add", "--force", "--detach", str(tree), sha)
    except SystemExit:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    try:
        yield tree, workdir
    finally:
        if keep:
            print(
                f"kept the baseline worktree {tree} (reused by later runs; remove it with "
                f"git worktree remove --force {tree})"
            )
        else:
            _git("worktree", "remove", "--force", str(tree))
            shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _extensions_lock(extensions: Path):
    """Holds ``extensions`` (a TORCH_EXTENSIONS_DIR of the benchmark's own) for one subprocess of
    the tree that builds or loads its extension there (torch takes its own ``lock`` file in the
    build folder even to check that a build is up to date). Every user of the folder holds this
    lock first, so while it is ours a ``lock`` file left in a build folder belongs to a process that
    was killed: torch would wait for it forever, silently, so it is removed."""
    with file_lock(extensions / ".benchmark.lock"):
        for stale in remove_stale(extensions, "*/lock"):
            print(f"  removed {stale}, left by a build that was killed")
        yield


class Tree:
    """One side of the comparison: a source tree run by subprocesses with its own PYTHONPATH."""

    def __init__(self, name: str, path: Path, commit: str, threads: int, extensions: Path | None = None):
        self.name, self.path, self.commit, self.threads, self.extensions = name, path, commit, threads, extensions
        self.package: str | None = None

    def _run(self, arguments: list[str]) -> dict:
        env = {
            **os.environ,
            "PYTHONPATH": str(self.path),
            "OMP_NUM_THREADS": str(self.threads),
            "MKL_NUM_THREADS": str(self.threads),
        }
        if self.extensions is not None:
            env["TORCH_EXTENSIONS_DIR"] = str(self.extensions)
        # -P: the timer's own folder is not put on sys.path; only PYTHONPATH says which package loads
        command = [
            sys.executable,
            "-P",
            loop_timer.__file__,
            "--expect-tree",
            str(self.path),
            "--threads",
            str(self.threads),
            *arguments,
        ]
        if self.extensions is None:
            done = subprocess.run(command, cwd=self.path, env=env, capture_output=True, text=True)
        else:
            with _extensions_lock(self.extensions):
                done = subprocess.run(command, cwd=self.path, env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith(loop_timer.RESULT_PREFIX)]
        if done.returncode or not lines:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
            raise SystemExit(f"the {self.name} tree ({self.path}) failed (exit code {done.returncode}):\n{tail}")
        result = json.loads(lines[-1][len(loop_timer.RESULT_PREFIX) :])
        self.package = result["torchrl_glam"]
        return result

    def prepare(self, preset: str, overrides: list[str]) -> float:
        """Imports the tree once (checking where torchrl_glam comes from) and builds what it builds
        at first use (an extension; its offline pretrained model, in a one-step run of ``preset``),
        so that no timed run pays for it; the seconds it took."""
        return self._run(["--prepare", "--preset", preset, *overrides])["prepare"]

    def measure(self, steps: int, preset: str, overrides: list[str]) -> dict:
        return self._run(["--steps", str(steps), "--preset", preset, *overrides])


def preset_config(preset: str, overrides: list[str]):
    """The SAC-GLAM config the timed runs train with (its environment's goal sets bound ``--sets``)."""
    from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
    from torchrl_glam.training.cli import chosen_environment
    from torchrl_glam.training.config import ConfigError, config_from_preset, parse_overrides

    try:
        environment = chosen_environment(PRESETS, preset, overrides)  # as the training script's command line
        return config_from_preset(
            SACGLAMConfig, PRESETS, preset, parse_overrides(overrides, SACGLAMConfig, environment)
        )
    except ConfigError as error:
        raise SystemExit(f"--preset {preset} {' '.join(overrides)}: {error}") from None


def compare(args) -> None:
    if any(o.split("=", 1)[0] == "goals" for o in args.overrides):
        raise SystemExit("set the task sets with --sets, not goals=...")
    cfg = preset_config(args.preset, args.overrides)
    goal_sets = cfg.environment.goal_sets
    sets = [s for s in (args.sets or cfg.env.goals).split(",") if s]
    unknown = [s for s in sets if s not in goal_sets]
    if unknown or not sets:
        raise SystemExit(
            f"--sets {args.sets!r}: give task sets from {goal_sets} (env={cfg.env.name!r}), comma-separated"
        )
    if args.rounds < 1 or args.steps < 1:
        raise SystemExit("--rounds and --steps must be at least 1")
    current = Tree("current", CURRENT_TREE, _current_label(), args.threads)
    with baseline_worktree(args.compare, args.keep_worktree, Path(args.worktree_dir or _cache_root())) as (
        path,
        workdir,
    ):
        baseline = Tree(
            "baseline",
            path,
            _git("rev-parse", "--short", "HEAD", cwd=path),
            args.threads,
            extensions=workdir / "torch_extensions",
        )
        print(
            f"preparing both trees, not timed: a one-step run of each, so that what a tree builds at first "
            f"use is built (an older tree pretrains its offline model, ~10 min; one that builds torchrl's "
            f"prioritized-replay extension builds it in {baseline.extensions}, ~1 min)"
        )
        for tree in (baseline, current):
            seconds = tree.prepare(args.preset, [f"goals={sets[0]}", *args.overrides])
            print(f"  {tree.name:8s} {tree.commit:16s} torchrl_glam from {tree.package} (prepared in {seconds:.1f} s)")
        print(
            f"{args.steps} environment steps per run (rounded up to the environments' number), "
            f"preset {args.preset}, {args.threads} thread(s); "
            "training loop only (start-up not counted, final evaluation and checkpoint skipped)"
        )
        writer = None
        if args.csv:
            new = not Path(args.csv).exists() or Path(args.csv).stat().st_size == 0
            handle = open(args.csv, "a", newline="")
            writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
            if new:
                writer.writeheader()
        ratios: dict[str, list[float]] = {s: [] for s in sets}
        cpu_ratios: dict[str, list[float]] = {s: [] for s in sets}  # steps per CPU second: robust to load
        cpu_measured: dict[str, float] = {}
        speeds: dict[tuple[str, str], list[float]] = {}
        try:
            for round_ in range(1, args.rounds + 1):
                order = (baseline, current) if round_ % 2 else (current, baseline)
                for task_set in sets:
                    measured = {}
                    for position, tree in enumerate(order, 1):
                        r = tree.measure(args.steps, args.preset, [f"goals={task_set}", *args.overrides])
                        measured[tree.name] = r["steps_per_second"]
                        cpu_measured[tree.name] = r["steps_per_cpu_second"]
                        speeds.setdefault((task_set, tree.name), []).append(r["steps_per_second"])
                        print(
                            f"round {round_}/{args.rounds}  {task_set:10s} {tree.name:8s} {tree.commit:16s} "
                            f"{r['steps_per_second']:7.2f} steps/s, {r['steps_per_cpu_second']:7.2f} per CPU "
                            f"second  (loop {r['loop']:.1f} s; start-up {r['startup']:.1f} s not counted)",
                            flush=True,
                        )
                        if writer:
                            writer.writerow(
                                {
                                    "round": round_,
                                    "task_set": task_set,
                                    "tree": tree.name,
                                    "commit": tree.commit,
                                    "position": position,
                                    "steps": r["steps"],
                                    "loop_seconds": f"{r['loop']:.3f}",
                                    "steps_per_second": f"{r['steps_per_second']:.3f}",
                                    "steps_per_cpu_second": f"{r['steps_per_cpu_second']:.3f}",
                                    "startup_seconds": f"{r['startup']:.3f}",
                                    "llm_forward_seconds": f"{r['llm_forward']:.3f}",
                                    "backward_seconds": f"{r['backward']:.3f}",
                                    "threads": r["threads"],
                                    "torchrl_glam_file": r["torchrl_glam"],
                                }
                            )
                            handle.flush()
                    ratios[task_set].append(measured["current"] / measured["baseline"])
                    cpu_ratios[task_set].append(cpu_measured["current"] / cpu_measured["baseline"])
        finally:
            if writer:
                handle.close()
    print(
        f"current {current.commit} / baseline {baseline.commit}, median over {args.rounds} round(s) "
        "of the per-round ratio of env steps/s:"
    )
    for task_set in sets:
        print(
            f"  {task_set:10s} ratio {statistics.median(ratios[task_set]):.2f}  (current "
            f"{statistics.median(speeds[(task_set, 'current')]):.2f}, baseline "
            f"{statistics.median(speeds[(task_set, 'baseline')]):.2f} steps/s; per round "
            + ", ".join(f"{r:.2f}" for r in ratios[task_set])
            + "); per CPU second "
            f"{statistics.median(cpu_ratios[task_set]):.2f} (per round "
            + ", ".join(f"{r:.2f}" for r in cpu_ratios[task_set])
            + ")"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu")
    parser.add_argument(
        "--steps", type=int, default=None, help="environment steps per run (default 2048; 3072 with --compare)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--compare",
        metavar="COMMIT",
        default=None,
        help="measure this tree against COMMIT (e.g. 52395e1), alternately, in one run",
    )
    parser.add_argument("--rounds", type=int, default=2, help="--compare: rounds of every tree and task set")
    parser.add_argument(
        "--sets", default=None, help="--compare: task sets (goals=...), comma-separated (default: the preset's goals)"
    )
    parser.add_argument("--csv", default=None, help="--compare: append one line per measurement to this CSV file")
    parser.add_argument(
        "--keep-worktree",
        action="store_true",
        help="--compare: keep the baseline's worktree (and its built extension) for later runs",
    )
    parser.add_argument(
        "--worktree-dir",
        default=None,
        help="--compare: where baseline worktrees go (default: benchmarks/ in the cache, $TORCHRL_GLAM_CACHE)",
    )
    parser.add_argument("overrides", nargs="*", help="field=value overrides of the preset, for every run")
    args = parser.parse_args(argv)
    if args.compare is None:
        args.steps = args.steps or 2048
        breakdown(args)
    else:
        args.steps = args.steps or 3072
        compare(args)


if __name__ == "__main__":
    main()
