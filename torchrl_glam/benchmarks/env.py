"""Steps per second of the batched Playground-Text environment.

    python -m torchrl_glam.benchmarks.env [--envs 32 256] [--steps 300] [--threads 1]

For each batch size, with random valid actions and TorchRL's ``step_and_maybe_reset`` (partial
resets included), it times:

* ``text``: the environment writing its text keys (prompt, actions, goal, reports) as tensordict
  non-tensor stacks, the plain TorchRL interface;
* ``compact``: tensors only (``text=False``) plus rendering the prompts and candidates to Python
  lists from the compact state with ``render_batch``: what a training loop feeding an LLM does;
* ``rules``: the numpy rules and social partner alone.

Figures are per batched step (all sub-environments) and sub-environment steps per second.
"""

from __future__ import annotations

import argparse
import time

import torch

from torchrl_glam.envs.playground import PlaygroundTextEnv, render_batch


def _time_per_call(fn, steps: int) -> float:
    for _ in range(max(5, steps // 10)):  # warm-up
        fn()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def measure(num_envs: int, steps: int, goals: str = "train") -> dict[str, float]:
    """Seconds per batched step of each mode, for ``num_envs`` sub-environments."""
    generator = torch.Generator().manual_seed(0)
    results = {}
    for mode in ("text", "compact"):
        env = PlaygroundTextEnv(num_envs=num_envs, goals=goals, seed=0, text=mode == "text")
        state = {"td": env.reset()}

        def step(env=env, state=state, mode=mode):
            td = state["td"]
            td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1))
            _, state["td"] = env.step_and_maybe_reset(td)
            if mode == "compact":
                r = env.rules
                render_batch(r.goal_id, r.objects, r.agent_on, r.held, r.grown, env.catalogue)

        results[mode] = _time_per_call(step, steps)

    rules = PlaygroundTextEnv(num_envs=num_envs, goals=goals, seed=0, text=False).rules

    def rules_step():
        mask = torch.from_numpy(rules.action_mask()).float()
        rules.steps[:] = 0  # never truncate: time the step alone
        rules.step(torch.multinomial(mask, 1, generator=generator).squeeze(-1).numpy())

    results["rules"] = _time_per_call(rules_step, steps)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--goals", default="train", choices=["train", "simplified", "held_out"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"Playground-Text ({args.goals} goals), {args.steps} batched steps, {args.threads} thread(s)")
    print(f"{'envs':>6} {'mode':>8} {'ms/step':>9} {'env-steps/s':>12}")
    for num_envs in args.envs:
        for mode, seconds in measure(num_envs, args.steps, args.goals).items():
            print(f"{num_envs:>6} {mode:>8} {seconds * 1e3:>9.3f} {num_envs / seconds:>12.0f}")


if __name__ == "__main__":
    main()
