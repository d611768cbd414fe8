"""Evaluation on fixed scenes: success overall and per goal type, and the evaluation sets a run
can log (:data:`EVAL_SETS`, chosen by the config's ``eval_sets``; defined in ``eval_sets.py``,
which needs no torch)."""

from __future__ import annotations

import torch
from torchrl.envs import EnvBase

from torchrl_glam.data.episodes import step_success
from torchrl_glam.training.eval_sets import EVAL_SETS, EvalSet

__all__ = ["EVAL_SETS", "EvalSet", "evaluate"]


@torch.no_grad()
def evaluate(policy, env: EnvBase, greedy: bool = True, *, goal_types: tuple[str, ...]) -> dict[str, float]:
    """Runs one episode in every sub-environment of ``env`` (reset with its seed, so every
    evaluation sees the same scenes and goals) and returns the success rates.

    ``policy(td, greedy=greedy)`` writes "action". A sampled evaluation draws from its own random
    stream, seeded by the environment's seed: it is the same for every algorithm and leaves the
    training's stream untouched (adding it to a run does not change the run). Keys: "success",
    "success/<goal type>" for the types present (``goal_types``: the names of the environment's
    types, ``TextEnvironment.goal_types``), "episode_length".
    """
    if greedy:
        return _episodes(policy, env, greedy, goal_types)
    # a policy on a GPU samples from that device's generator: fork it too (fork_rng forks the CPU's)
    devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(env.seed_value)
        return _episodes(policy, env, greedy, goal_types)


def _episodes(policy, env: EnvBase, greedy: bool, goal_types: tuple[str, ...]) -> dict[str, float]:
    env.set_seed(env.seed_value)
    td = env.reset()
    num = env.num_envs
    success = torch.zeros(num, dtype=torch.bool)
    ended = torch.zeros(num, dtype=torch.bool)
    length = torch.zeros(num)
    goal_type = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()])
    for _ in range(env.max_steps):
        policy(td, greedy=greedy)
        out = env.step(td)["next"]
        running = ~ended
        success |= running & step_success(out).squeeze(-1)
        length += running.float()
        ended |= out["done"].squeeze(-1)
        if ended.all():
            break
        td = out.exclude("reward", "done", "terminated", "truncated")
    results = {"success": success.float().mean().item(), "episode_length": length.mean().item()}
    for k, name in enumerate(goal_types):
        chosen = goal_type == k
        if chosen.any():
            results[f"success/{name}"] = success[chosen].float().mean().item()
    return results
