"""TextWorld's costs: environment steps per second (1 and N games), memory per started game, and what
a cooking state's candidates cost the scorer against Playground-Text's.

    OMP_NUM_THREADS=1 python experiments/textworld/speed.py --out experiments/textworld/speed.json

Environment: random legal commands with ``step_and_maybe_reset`` (resets included), compact state
plus rendering the prompts (what a training loop does). Memory: the resident set size after
starting the games of a pool, per game. Scoring: the shipped random-init tiny T5 scoring one batch
of 32 states' prompts and candidates (its forward, no gradient), on TextWorld's cooking states (up
to 64 candidates, ~30 admissible) and on Playground-Text's (10 candidates), per state and per
candidate.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.textworld import TextWorldText


def env_steps_per_second(environment, num_envs: int, steps: int) -> float:
    env = environment.make_env(num_envs, seed=0, max_steps=20)
    generator = torch.Generator().manual_seed(0)
    td = env.reset()
    start = time.perf_counter()
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        _, td = env.step_and_maybe_reset(td)
        environment.render(td)
    return num_envs * steps / (time.perf_counter() - start)


def _resident_kib() -> int:
    """The process's resident set size now (Linux's /proc; ru_maxrss is a peak, which earlier
    allocations may already exceed)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def memory_per_game(environment, games: int) -> float:
    """MiB of resident memory per started game: each holds its own interpreter and story file."""
    env = environment.make_env(1, seed=0)
    before = _resident_kib()
    started = [env._start(g % len(env.games)) for g in range(games)]
    after = _resident_kib()
    for game in started:
        game.close()
    return (after - before) / 1024 / games


def scoring_seconds(environment, states: int = 32, repeats: int = 5) -> dict[str, float]:
    from torchrl_glam.modules import make_scorer

    scorer = make_scorer(None)
    env = environment.make_env(states, seed=0, max_steps=20)
    td = env.reset()
    for _ in range(3):  # a few steps in, past the first rooms
        td["action"] = td["action_mask"].float().argmax(-1)
        _, td = env.step_and_maybe_reset(td)
    prompts, candidates = environment.render(td)
    batch = td.select("action_mask").set("prompt", prompts).set("actions", candidates)
    with torch.no_grad():
        scorer(batch.clone())
        start = time.perf_counter()
        for _ in range(repeats):
            scorer(batch.clone())
    seconds = (time.perf_counter() - start) / repeats
    legal = float(td["action_mask"].sum(-1).float().mean())
    return {
        "candidates": td["action_mask"].shape[-1],
        "legal_candidates": legal,
        "seconds_per_state": seconds / states,
        "seconds_per_candidate": seconds / states / td["action_mask"].shape[-1],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    coin = get_environment("textworld_coin_collector")
    results = {
        "env_steps_per_second": {str(n): env_steps_per_second(coin, n, args.steps) for n in args.envs},
        "memory_mib_per_started_game": memory_per_game(coin, 32),
        "scoring": {
            "textworld_cooking": scoring_seconds(TextWorldText("cooking", train_games=8, held_out_games=2)),
            "playground": scoring_seconds(get_environment("playground")),
        },
    }
    cooking, playground = results["scoring"]["textworld_cooking"], results["scoring"]["playground"]
    results["scoring"]["state_cost_ratio"] = cooking["seconds_per_state"] / playground["seconds_per_state"]
    print(json.dumps(results, indent=1))
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
