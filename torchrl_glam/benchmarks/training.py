"""Where the time of a SAC-GLAM run goes: the LLM forward and backward versus everything else.

    python -m torchrl_glam.benchmarks.training [--preset cpu] [--steps 2048] [field=value ...]

Runs the SAC-GLAM training script (``torchrl_glam.training.scripts.sac_glam``) for ``--steps`` environment steps with the
LLM scorer's forward and every backward pass timed, and prints the share of wall time spent
outside them: environment steps, rendering, replay, HER, n-step, optimiser steps, logging
(the goal is at most 15%). Evaluation and checkpoints are pushed past the end of the run.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

from torchrl_glam.envs import PlaygroundTextEnv
from torchrl_glam.modules import LLMScorer
from torchrl_glam.training import run as harness
from torchrl_glam.training.scripts import get_script


def _timed(function, bucket: dict, name: str):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            bucket[name] += time.perf_counter() - start

    return wrapper


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--steps", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    example = get_script("sac_glam").load()

    bucket = {"llm_forward": 0.0, "backward": 0.0, "evaluation": 0.0, "evaluation_forward": 0.0}
    first_step: list[float] = []
    forward, backward = LLMScorer.forward, torch.Tensor.backward
    step = PlaygroundTextEnv.step_and_maybe_reset
    evaluate = harness.evaluate  # the harness evaluates on its schedule

    def timed_evaluate(*a, **k):  # evaluation is not part of the training loop: set it apart
        start, before = time.perf_counter(), bucket["llm_forward"]
        try:
            return evaluate(*a, **k)
        finally:
            bucket["evaluation"] += time.perf_counter() - start
            bucket["evaluation_forward"] += bucket["llm_forward"] - before

    def first_step_marker(self, td):
        if not first_step:
            first_step.append(time.perf_counter())
        return step(self, td)

    LLMScorer.forward = _timed(forward, bucket, "llm_forward")
    torch.Tensor.backward = _timed(backward, bucket, "backward")
    PlaygroundTextEnv.step_and_maybe_reset = first_step_marker
    harness.evaluate = timed_evaluate
    far = str(10 * args.steps)
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            start = time.perf_counter()
            example.main(["--preset", args.preset, "--run-dir", run_dir, "--no-progress",
                          f"total_steps={args.steps}", f"eval_every={far}", f"checkpoint_every={far}",
                          *args.overrides])
            end = time.perf_counter()
    finally:
        LLMScorer.forward, torch.Tensor.backward = forward, backward
        PlaygroundTextEnv.step_and_maybe_reset = step
        harness.evaluate = evaluate
    # the training loop: from the first environment step to the end, evaluation set apart
    loop = end - first_step[0] - bucket["evaluation"]
    llm = bucket["llm_forward"] - bucket["evaluation_forward"]
    other = loop - llm - bucket["backward"]
    print(f"{args.steps} environment steps, training loop {loop:.1f} s ({args.steps / loop:.0f} steps/s), "
          f"{args.threads} thread(s); start-up {first_step[0] - start:.1f} s and evaluation "
          f"{bucket['evaluation']:.1f} s not counted")
    print(f"  LLM forward (acting and learning): {llm:6.1f} s  ({llm / loop:.0%})")
    print(f"  backward:                          {bucket['backward']:6.1f} s  ({bucket['backward'] / loop:.0%})")
    print(f"  everything else:                   {other:6.1f} s  ({other / loop:.1%})  (goal: at most 15%)")

if __name__ == "__main__":
    main()
