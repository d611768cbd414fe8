"""Where the time of a SAC-GLAM run goes: the LLM forward and backward versus everything else.

    python -m torchrl_glam.benchmarks.training [--preset cpu] [--steps 2048] [field=value ...]

Runs ``examples/sac_glam.py`` (from a source checkout) for ``--steps`` environment steps with the
LLM scorer's forward and every backward pass timed, and prints the share of wall time spent
outside them: environment steps, rendering, replay, HER, n-step, optimiser steps, logging
(the goal is at most 15%). Evaluation and checkpoints are pushed past the end of the run.
"""
from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import torch

from torchrl_glam.modules import LLMScorer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sac_glam.py"


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
    if not EXAMPLE.exists():
        raise SystemExit(f"{EXAMPLE} not found: run this benchmark from a source checkout")
    torch.set_num_threads(args.threads)
    spec = importlib.util.spec_from_file_location("sac_glam_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    bucket = {"llm_forward": 0.0, "backward": 0.0}
    forward, backward = LLMScorer.forward, torch.Tensor.backward
    LLMScorer.forward = _timed(forward, bucket, "llm_forward")
    torch.Tensor.backward = _timed(backward, bucket, "backward")
    far = str(10 * args.steps)
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            start = time.perf_counter()
            example.main(["--preset", args.preset, "--run-dir", run_dir, "--no-progress",
                          f"total_steps={args.steps}", f"eval_every={far}", f"checkpoint_every={far}",
                          *args.overrides])
            total = time.perf_counter() - start
    finally:
        LLMScorer.forward, torch.Tensor.backward = forward, backward
    inside = bucket["llm_forward"] + bucket["backward"]
    print(f"{args.steps} environment steps in {total:.1f} s ({args.steps / total:.0f} steps/s), {args.threads} thread(s)")
    print(f"  LLM forward (acting and learning): {bucket['llm_forward']:.1f} s  ({bucket['llm_forward'] / total:.0%})")
    print(f"  backward:                          {bucket['backward']:.1f} s  ({bucket['backward'] / total:.0%})")
    print(f"  everything else:                   {total - inside:.1f} s  ({(total - inside) / total:.0%})"
          " (includes the final evaluation and start-up)")


if __name__ == "__main__":
    main()
