"""The CPU cost of exact decoder-only tokenisation in a Table 3 loop, with and without the memoised
(prompt, candidates) pairs of ``modules/tokenisation.py``, in one run.

    python -m torchrl_glam.benchmarks.tokenisation [--model smollm2-135m] [--transitions 2048]

A stream shaped like SAC-GLAM's Table 3 schedule on an environment's training goals (``--env``; the
default environment's are Playground-Text's full task set): 32 environments act (their
32 prompts tokenised), every transition goes to a uniform replay, and every 32 transitions 2 updates
each tokenise 256 replayed observations and their next observations. Both tokenisers see the same
stream; the time is the tokeniser's alone (no model), per 32 transitions. HER's relabeled copies are
not simulated (each is a new prompt the first time it is sampled).
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from torchrl_glam.benchmarks.observations import random_step, text_env
from torchrl_glam.envs import DEFAULT_ENVIRONMENT
from torchrl_glam.modules.loading import LLMConfig, resolve_model_source
from torchrl_glam.modules.tokenisation import DEFAULT_PAIR_CACHE_SIZE, CandidateTokeniser


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    name, gguf_file = resolve_model_source(LLMConfig(model).name_or_path)
    return AutoTokenizer.from_pretrained(name, **({"gguf_file": gguf_file} if gguf_file else {}))


def stream(
    transitions: int, num_envs: int, batch_size: int, num_updates: int, seed: int = 0, env: str = DEFAULT_ENVIRONMENT
):
    """Yields the batches (prompts, candidates, mask) a Table 3 loop tokenises, in order, on the
    training goals of the environment ``env``."""
    env = text_env(env, num_envs, seed=seed)
    rng = random.Random(seed)
    td = env.reset()
    replay = []  # (observation, next observation), each (prompt, candidates, mask row)
    for _ in range(transitions // num_envs):
        observations = list(zip(td["prompt"], td["actions"], td["action_mask"]))
        yield observations
        stepped, td = random_step(env, td)
        after = stepped["next"]
        replay += zip(observations, zip(after["prompt"], after["actions"], after["action_mask"]))
        for _ in range(num_updates):
            batch = rng.choices(replay, k=batch_size)
            yield [pair[0] for pair in batch]
            yield [pair[1] for pair in batch]


def run(tokeniser: CandidateTokeniser, batches) -> float:
    """Seconds spent tokenising the batches."""
    spent = 0.0
    for rows in batches:  # the environment's action spec gives every row the same candidate count
        candidates, mask = [list(row[1]) for row in rows], torch.stack([row[2] for row in rows])
        start = time.perf_counter()
        tokeniser([row[0] for row in rows], candidates, mask, left_pad_prompts=True, device=torch.device("cpu"))
        spent += time.perf_counter() - start
    return spent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="a decoder-only model's name or path")
    parser.add_argument("--transitions", type=int, default=2048)
    parser.add_argument("--env", default=DEFAULT_ENVIRONMENT, help="a registered environment")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model)
    batches = list(stream(args.transitions, num_envs=32, batch_size=256, num_updates=2, env=args.env))
    rounds = args.transitions // 32
    for name, size in (("every pair encoded", 0), ("memoised pairs", DEFAULT_PAIR_CACHE_SIZE)):
        tokeniser = CandidateTokeniser(tokenizer, is_encoder_decoder=False, tokenization="exact", pair_cache_size=size)
        seconds = run(tokeniser, batches)
        print(
            f"{name:20s} {1e3 * seconds / rounds:7.1f} ms of tokenisation per 32 transitions "
            f"({args.transitions} transitions, {args.model})",
            flush=True,
        )


if __name__ == "__main__":
    main()
