"""Steps per second of a registered environment's batched ``EnvBase`` (default: the default
environment, Playground-Text).

    python -m torchrl_glam.benchmarks.env [--env NAME] [--goals SET] [--envs 32 256] [--steps 300] [--threads 1]

For each batch size, with random valid actions and TorchRL's ``step_and_maybe_reset`` (partial
resets included), it times:

* ``text``: the environment with its render transform writing the text keys (``"prompt"``,
  ``"actions"``) as tensordict non-tensor stacks, the plain TorchRL interface;
* ``compact``: tensors only, plus rendering the prompts and candidates to Python lists from the
  compact state with the environment's ``render``: what a training loop feeding an LLM does.

Figures are per batched step (all sub-environments) and sub-environment steps per second.
"""

from __future__ import annotations

import argparse
import time

import torch

from torchrl_glam.benchmarks.observations import batched_env, random_step, text_env
from torchrl_glam.envs import DEFAULT_ENVIRONMENT, get_environment


def _time_per_call(fn, steps: int) -> float:
    for _ in range(max(5, steps // 10)):  # warm-up
        fn()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def measure(num_envs: int, steps: int, goals: str | None = None, env: str = DEFAULT_ENVIRONMENT) -> dict[str, float]:
    """Seconds per batched step of each mode, for ``num_envs`` sub-environments of ``env``."""
    environment = get_environment(env)
    generator = torch.Generator().manual_seed(0)
    results = {}
    for mode in ("text", "compact"):
        batched = text_env(env, num_envs, goals) if mode == "text" else batched_env(env, num_envs, goals)
        state = {"td": batched.reset()}

        def step(batched=batched, state=state, mode=mode):
            _, state["td"] = random_step(batched, state["td"], generator)
            if mode == "compact":
                environment.render({key: state["td"][key] for key in environment.state_keys})

        results[mode] = _time_per_call(step, steps)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=DEFAULT_ENVIRONMENT, help="a registered environment")
    parser.add_argument("--envs", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--goals", default=None, help="one of the environment's goal sets (default: its first)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    goals = args.goals or get_environment(args.env).goal_sets[0]
    print(f"{args.env} ({goals} goals), {args.steps} batched steps, {args.threads} thread(s)")
    print(f"{'envs':>6} {'mode':>8} {'ms/step':>9} {'env-steps/s':>12}")
    for num_envs in args.envs:
        for mode, seconds in measure(num_envs, args.steps, goals, args.env).items():
            print(f"{num_envs:>6} {mode:>8} {seconds * 1e3:>9.3f} {num_envs / seconds:>12.0f}")


if __name__ == "__main__":
    main()
