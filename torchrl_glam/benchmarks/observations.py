"""What the benchmarks score and step, from any registered environment through the protocol (the
benchmarks import no environment of their own: ``--env`` names one, the default environment by
default): its batched environment with its text rendered, and the scorer's inputs of states of
random play."""

from __future__ import annotations

import torch
from torchrl.envs import EnvBase, TransformedEnv

from torchrl_glam.envs import DEFAULT_ENVIRONMENT, get_environment


def batched_env(
    name: str = DEFAULT_ENVIRONMENT, num_envs: int = 32, goals: str | None = None, seed: int = 0
) -> EnvBase:
    """The environment ``name``'s batched ``EnvBase`` of compact states, on ``goals`` (default: its
    training goal set)."""
    environment = get_environment(name)
    return environment.make_env(num_envs, seed=seed, goals=goals or environment.goal_sets[0])


def text_env(name: str = DEFAULT_ENVIRONMENT, num_envs: int = 32, goals: str | None = None, seed: int = 0) -> EnvBase:
    """:func:`batched_env` writing its text (``"prompt"``, ``"actions"``) through the environment's
    render transform."""
    return TransformedEnv(batched_env(name, num_envs, goals, seed), get_environment(name).render_transform())


def random_step(env: EnvBase, td, generator: torch.Generator | None = None):
    """One step of a uniformly random legal action (partial resets included): (the step, the next
    root tensordict)."""
    td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1))
    return env.step_and_maybe_reset(td)


def scorer_inputs(td) -> tuple[list[str], list[list[str]], torch.Tensor]:
    """(prompts, candidates, action mask) of a rendered tensordict, as the scorer takes them."""
    return list(td["prompt"]), [list(row) for row in td["actions"]], td["action_mask"].clone()


def observations_pair(batch: int, name: str = DEFAULT_ENVIRONMENT, goals: str | None = None):
    """The scorer's inputs of ``batch`` first states of ``name`` and of the states one random step
    later: what an update scores with and without gradient."""
    env = text_env(name, batch, goals)
    observation = env.reset()
    step, _ = random_step(env, observation, torch.Generator().manual_seed(0))
    return [scorer_inputs(observation), scorer_inputs(step["next"])]


__all__ = ["batched_env", "observations_pair", "random_step", "scorer_inputs", "text_env"]
