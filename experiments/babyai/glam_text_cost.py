"""What BabyAI-Text's prompts cost with history=2: characters, tokens of the tiny model's word
tokenizer, and environment steps per CPU second (this process's CPU time, which other processes
on a shared machine disturb far less than wall-clock time), on fixed states of random play (MixedTrainLocal, 16
environments x 40 steps, seed 0); also the same states' prompts without history, and the walls
a view reports.

Runs on any commit since history existed (it uses only the API common to them), so the same
script measures before and after a change of the text on the same states:

    OMP_NUM_THREADS=1 PYTHONPATH=<checkout> python experiments/babyai/glam_text_cost.py

Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import time

import torch

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.babyai import BabyAITextEnv
from torchrl_glam.offline.tiny import build_word_tokenizer

NUM_ENVS, STEPS, SEED, HISTORY = 16, 40, 0, 2


def random_play(env: BabyAITextEnv, steps: int, seed: int) -> tuple[list[str], float]:
    """The prompts of ``steps`` steps of uniformly random actions (fixed generator), and the
    CPU seconds the steps took (rendering included: the environment writes the prompts)."""
    gen = torch.Generator().manual_seed(seed)
    td, prompts, seconds = env.reset(), [], 0.0
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1)
        start = time.process_time()
        _, td = env.step_and_maybe_reset(td)
        seconds += time.process_time() - start
        prompts += list(td["prompt"])
    return prompts, seconds


def render_rate(repeats: int = 7) -> float:
    """Prompts rendered per CPU second from the compact states of the same random play (the text
    alone, what a replay buffer's sampled batch costs): the best of ``repeats``."""
    from torchrl_glam.envs.babyai.environment import BabyAIText

    environment = BabyAIText().with_options(history=HISTORY)
    env = BabyAITextEnv(num_envs=NUM_ENVS, level="MixedTrainLocal", seed=SEED, history=HISTORY, text=False)
    gen = torch.Generator().manual_seed(SEED)
    td, states = env.reset(), []
    for _ in range(STEPS):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1)
        _, td = env.step_and_maybe_reset(td)
        states.append(td.select(*environment.state_keys).clone())
    batch = torch.cat(states)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        environment.render({k: batch[k] for k in environment.state_keys})
        best = min(best, time.process_time() - start)
    return len(batch) / best


def main() -> None:
    torch.set_num_threads(1)
    tokenizer = build_word_tokenizer("t5", get_environment("babyai"))
    env = BabyAITextEnv(num_envs=NUM_ENVS, level="MixedTrainLocal", seed=SEED, history=HISTORY)
    prompts, _ = random_play(env, STEPS, SEED)
    tokens = [len(ids) for ids in tokenizer(prompts)["input_ids"]]
    # the same states without history: one view per prompt
    single, _ = random_play(BabyAITextEnv(num_envs=NUM_ENVS, level="MixedTrainLocal", seed=SEED), STEPS, SEED)
    unknown = sum(ids.count(tokenizer.unk_token_id) for ids in tokenizer(prompts)["input_ids"])
    # steps per CPU second: 7 repeats of the same 40 steps x 16 environments; the best is the least
    # disturbed by other processes on the machine
    rates = []
    for _ in range(7):
        env = BabyAITextEnv(num_envs=NUM_ENVS, level="MixedTrainLocal", seed=SEED, history=HISTORY)
        _, seconds = random_play(env, STEPS, SEED)
        rates.append(NUM_ENVS * STEPS / seconds)
    print(
        json.dumps(
            {
                "prompts": len(prompts),
                "mean_chars": round(statistics.mean(map(len, prompts)), 1),
                "mean_tokens": round(statistics.mean(tokens), 1),
                "max_tokens": max(tokens),
                "history0_mean_chars": round(statistics.mean(map(len, single)), 1),
                "history0_mean_tokens": round(statistics.mean(len(ids) for ids in tokenizer(single)["input_ids"]), 1),
                "walls_per_view": round(statistics.mean(p.count("You see a wall") for p in single), 2),
                "unknown_tokens": unknown,
                "env_steps_per_s_best": round(max(rates)),
                "env_steps_per_s_median": round(statistics.median(rates)),
                "env_steps_per_s_all": [round(r) for r in rates],
                "render_prompts_per_s_best": round(render_rate()),
                "example": prompts[NUM_ENVS * 3],
            }
        )
    )


if __name__ == "__main__":
    main()
