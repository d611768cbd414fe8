"""Greedy evaluation on fixed scenes: success overall and per goal type."""
from __future__ import annotations

import torch

from torchrl_glam.envs import GOAL_TYPES, PlaygroundTextEnv


@torch.no_grad()
def evaluate(policy, env: PlaygroundTextEnv) -> dict[str, float]:
    """Runs one episode in every sub-environment of ``env`` (reset with its seed, so every
    evaluation sees the same scenes and goals) and returns the success rates.

    ``policy(td, greedy=True)`` writes "action". Keys: "success", "success/<goal type>" for the
    types present, "episode_length".
    """
    env.set_seed(env.seed_value)
    td = env.reset()
    num = env.num_envs
    success = torch.zeros(num, dtype=torch.bool)
    ended = torch.zeros(num, dtype=torch.bool)
    length = torch.zeros(num)
    goal_type = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()])
    for _ in range(env.max_steps):
        policy(td, greedy=True)
        out = env.step(td)["next"]
        running = ~ended
        success |= running & out["terminated"].squeeze(-1)
        length += running.float()
        ended |= out["done"].squeeze(-1)
        if ended.all():
            break
        td = out.exclude("reward", "done", "terminated", "truncated")
    results = {"success": success.float().mean().item(), "episode_length": length.mean().item()}
    for k, name in enumerate(GOAL_TYPES):
        chosen = goal_type == k
        if chosen.any():
            results[f"success/{name}"] = success[chosen].float().mean().item()
    return results
