"""Times the SAC-GLAM training loop of whichever ``torchrl_glam`` is importable: the one timing entry
of ``python -m torchrl_glam.benchmarks.training``, in-process and in its ``--compare`` mode.

``--compare`` runs this file, by path, in a subprocess whose ``PYTHONPATH`` is another tree (e.g.
a git worktree of an older commit), so it must work with that tree's package as well as with
today's: it imports nothing of ``torchrl_glam`` at module level, and it finds the training script
and the names it patches the way each layout has them (``torchrl_glam.algorithms`` today,
``torchrl_glam.training.scripts`` before; ``examples/sac_glam.py`` in the tree at older commits,
such as 52395e1).

What is timed, the same way in every tree: from the first environment step of the training loop
to the moment the run's final evaluation would begin (evaluation and checkpoints are pushed past
the end of the run, so that is the end of the last iteration's updates). The run stops there: the
final evaluation and checkpoint are skipped, start-up (model, environments, replay, and any
compilation it does) is reported apart and not counted. The LLM scorer's forward and every
backward pass are timed inside the loop, for the breakdown.

    python -P torchrl_glam/benchmarks/loop_timer.py --expect-tree TREE [--steps N] [field=value ...]

prints one line ``GLAM_LOOP_TIMING {json}`` (the driver parses it).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

RESULT_PREFIX = "GLAM_LOOP_TIMING "
# set by the timer itself: an override of one of these would move the end of the timed loop
RESERVED_FIELDS = ("total_steps", "eval_every", "checkpoint_every", "run_dir")


class _LoopEnded(Exception):
    """Raised from the final evaluation: the training loop is over, the rest is not timed."""


def _timed(function, bucket: dict, name: str):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            bucket[name] += time.perf_counter() - start

    return wrapper


def tree_root() -> Path:
    """The source tree the imported ``torchrl_glam`` comes from (the folder holding the package)."""
    import torchrl_glam

    return Path(torchrl_glam.__file__).resolve().parents[1]


def check_tree(expected: str | Path) -> str:
    """``torchrl_glam.__file__``, after checking that it lies in ``expected`` (a tree given by
    ``PYTHONPATH``; an editable install of another checkout would otherwise win silently)."""
    import torchrl_glam

    found, expected = Path(torchrl_glam.__file__).resolve(), Path(expected).resolve()
    if expected not in found.parents:
        raise SystemExit(
            f"torchrl_glam was imported from {found}, not from the tree {expected}: put the "
            f"tree first on PYTHONPATH (PYTHONPATH={expected})"
        )
    return str(found)


def load_sac_glam_script() -> ModuleType:
    """The SAC-GLAM training script (a module with ``main(argv)``) of the imported tree."""
    for registry in ("torchrl_glam.algorithms", "torchrl_glam.training.scripts"):  # today's layout, then 0.1's
        try:
            scripts = importlib.import_module(registry)
        except ModuleNotFoundError as err:
            if err.name != registry:
                raise
        else:
            return scripts.get_script("sac_glam").load()
    # older trees: the loop lived in examples/sac_glam.py of the source checkout
    example = tree_root() / "examples" / "sac_glam.py"
    if not example.exists():
        raise SystemExit(
            f"this torchrl_glam has neither torchrl_glam.training.scripts nor {example}: "
            "run the benchmark from a source checkout"
        )
    spec = importlib.util.spec_from_file_location("sac_glam_example", example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_harness() -> None:
    """Imports the run harness (``torchrl_glam.training.run``) of a tree that has one, so that the
    ``evaluate`` it imported is found and rebound before the script's ``main`` runs."""
    try:
        importlib.import_module("torchrl_glam.training.run")
    except ModuleNotFoundError as err:
        if err.name != "torchrl_glam.training.run":
            raise


def _rebind(original, replacement, modules: list[ModuleType]) -> list[tuple[ModuleType, str]]:
    """Binds ``replacement`` wherever one of ``modules`` holds ``original`` as a global (a name
    imported with ``from x import f`` is a copy in each importer); returns what to restore."""
    bound = []
    for module in modules:
        for name, value in list(vars(module).items()):
            if value is original:
                setattr(module, name, replacement)
                bound.append((module, name))
    return bound


def config_has_field(name: str) -> bool:
    """Whether the timed tree's config takes ``name`` (a tree of earlier commits has flat fields)."""
    from torchrl_glam.training import config

    if hasattr(config.GLAMConfig, "has_field"):
        return config.GLAMConfig.has_field(name)
    return any(f.name == name for f in dataclasses.fields(config.GLAMConfig))


def time_training_loop(
    steps: int,
    preset: str = "cpu",
    overrides: list[str] = (),
    threads: int = 1,
    check_steps: bool = True,
    profile=None,
) -> dict:
    """Runs the SAC-GLAM script for ``steps`` environment steps and returns what it measured:
    ``steps`` (environment steps taken: ``steps`` rounded up to a multiple of ``num_envs``), seconds
    of ``loop`` (first environment step to the end of the last update), ``startup`` (not counted),
    ``llm_forward`` and ``backward`` (inside the loop), ``steps_per_second``, the torch ``threads``
    the loop ran with, and the ``torchrl_glam`` package file.

    ``check_steps``: refuse a run that stepped an environment more often than its loop should (its
    start-up did, e.g. an older tree pretraining its offline model on random play at first use:
    the timing would then start inside the start-up)."""
    import torch

    reserved = [o for o in overrides if o.split("=", 1)[0] in RESERVED_FIELDS]
    if reserved:
        raise SystemExit(
            f"the benchmark sets {', '.join(RESERVED_FIELDS)} itself (got {reserved}): use "
            "--steps for the number of environment steps"
        )
    threads_before = torch.get_num_threads()  # in-process (tests), the caller's setting comes back
    torch.set_num_threads(threads)
    script = load_sac_glam_script()
    _import_harness()  # where evaluate is bound: today's script imports the harness in main only
    from torchrl.envs import EnvBase

    from torchrl_glam.modules import LLMScorer
    from torchrl_glam.training import evaluation

    bucket = {"llm_forward": 0.0, "backward": 0.0}
    marks: dict[str, float] = {}
    before: dict[str, float] = {}
    forward, backward = LLMScorer.forward, torch.Tensor.backward
    # TorchRL's own method, which no environment of the package overrides (in any tree): the loop
    # starts at its first call, whatever environment the preset names
    step = EnvBase.step_and_maybe_reset
    evaluate = evaluation.evaluate

    def first_step_marker(self, td):
        marks["batch"] = td.batch_size.numel()
        if "first_step" not in marks:  # the first action's forward came before: not in the loop
            marks["first_step"] = time.perf_counter()
            marks["first_step_cpu"] = time.process_time()
            marks["threads"] = torch.get_num_threads()  # the script may set its own: what the loop ran with
            before.update(bucket)
            if profile is not None:
                profile.active = True
        marks["steps"] = marks.get("steps", 0) + td.batch_size.numel()  # --steps rounds up to num_envs
        return step(self, td)

    def end_at_evaluation(*args, **kwargs):
        # evaluations are pushed past the end, so the first one is the final one: the loop is over
        marks["end"], marks["end_cpu"] = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.active = False
        raise _LoopEnded

    # the harness (today) or the example script (older trees) imported evaluate under its own name
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("torchrl_glam") and m is not None]
    modules.append(script)
    LLMScorer.forward = _timed(forward, bucket, "llm_forward")
    torch.Tensor.backward = _timed(backward, bucket, "backward")
    EnvBase.step_and_maybe_reset = first_step_marker
    rebound = _rebind(evaluate, end_at_evaluation, modules)
    far = str(10 * steps)
    threads_override = [f"num_threads={threads}"] if config_has_field("num_threads") else []
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            start = time.perf_counter()
            try:
                script.main(
                    [
                        "--preset",
                        preset,
                        "--run-dir",
                        run_dir,
                        "--no-progress",
                        f"total_steps={steps}",
                        f"eval_every={far}",
                        f"checkpoint_every={far}",
                        *threads_override,
                        *overrides,
                    ]
                )
            except _LoopEnded:
                pass
            marks.setdefault("end", time.perf_counter())  # a run without evaluation: its end
            marks.setdefault("end_cpu", time.process_time())
    finally:
        torch.set_num_threads(threads_before)
        LLMScorer.forward, torch.Tensor.backward = forward, backward
        EnvBase.step_and_maybe_reset = step
        for module, name in rebound:
            setattr(module, name, evaluate)
    if "first_step" not in marks:
        raise SystemExit(
            "the training script never called an environment's step_and_maybe_reset: the "
            "benchmark cannot tell where its loop starts"
        )
    expected = -(-steps // marks["batch"]) * marks["batch"]  # --steps rounded up to the environments
    if check_steps and marks["steps"] != expected:
        raise SystemExit(
            f"the run stepped environments {marks['steps']} times where its loop takes {expected} "
            "steps: something before the loop (a model built at first use, e.g. pretrained "
            "on random play) stepped them too, so the timing began before the loop. Run it "
            "once first (the --prepare mode of the driver does), then time it"
        )
    import torchrl_glam

    loop = marks["end"] - marks["first_step"]
    # CPU seconds of this process over the loop: with one torch thread, what the loop cost whatever
    # else the machine runs (wall time on a shared machine also counts the waits for a core)
    loop_cpu = marks["end_cpu"] - marks["first_step_cpu"]
    return {
        "steps": marks["steps"],
        "loop": loop,
        "steps_per_second": marks["steps"] / loop,
        "loop_cpu": loop_cpu,
        "steps_per_cpu_second": marks["steps"] / loop_cpu,
        "startup": marks["first_step"] - start,
        "llm_forward": bucket["llm_forward"] - before["llm_forward"],
        "backward": bucket["backward"] - before["backward"],
        "threads": marks["threads"],
        "torchrl_glam": torchrl_glam.__file__,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect-tree", required=True, help="the tree torchrl_glam must come from")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--steps", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only import the tree and build what it builds at first use (torchrl's "
        "prioritized-replay extension, in older trees; the offline pretrained "
        "model, by a short untimed run of the preset); prints the seconds",
    )
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    package = check_tree(args.expect_tree)
    if args.prepare:
        start = time.perf_counter()
        try:
            prioritized = importlib.import_module("torchrl_glam.data.prioritized")
        except ModuleNotFoundError:
            prioritized = None
        if prioritized is not None and hasattr(prioritized, "ensure_prioritized_replay"):
            prioritized.ensure_prioritized_replay()
        # a run of one step: what the script builds at start-up on first use is built (and cached)
        time_training_loop(1, args.preset, args.overrides, args.threads, check_steps=False)
        # on a line of its own: the run may have left a line unfinished (an evaluation's, as it grows)
        print("\n" + RESULT_PREFIX + json.dumps({"prepare": time.perf_counter() - start, "torchrl_glam": package}))
        return
    result = time_training_loop(args.steps, args.preset, args.overrides, args.threads)
    print("\n" + RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
