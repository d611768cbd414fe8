"""Evaluation on fixed scenes: success overall and per goal type, and the evaluation sets a run
can log (:data:`EVAL_SETS`, chosen by the config's ``eval_sets``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torchrl.envs import EnvBase

from torchrl_glam.data.episodes import step_success
from torchrl_glam.envs.protocol import get_environment


@dataclass(frozen=True)
class EvalSet:
    """Which episodes an evaluation set runs and how the agent acts in them."""

    goals: str | None  # the goal set; None: the run's own (``cfg.goals``)
    goal_sampling: str  # "by_type": goal types uniform; "uniform": as training samples goals
    seed_offset: int  # the episodes' seed is seed_offset + the run's seed: the same for every algorithm
    title: str  # what a figure's panel calls it
    greedy: bool = True  # the policy's mode, or a sample of it


#: The evaluation sets a run can log, by name. "train" weighs the goal types equally (on the full
#: task set a per-type average, as 97.85% of its goals are sequential); "train_distribution" samples
#: goals as training does (the paper's measure); "train_sampled" runs "train"'s episodes with the
#: sampled policy, which greedy evaluation may hide.
EVAL_SETS: dict[str, EvalSet] = {
    "train": EvalSet(None, "by_type", 10_000, "training goals, types uniform"),
    "train_distribution": EvalSet(None, "uniform", 30_000, "training goals as sampled in training"),
    "held_out": EvalSet("held_out", "uniform", 20_000, "held-out goals (never trained on)"),
    "train_sampled": EvalSet(None, "by_type", 10_000, "training goals, types uniform, sampled policy", greedy=False),
    "held_out_sampled": EvalSet(
        "held_out", "uniform", 20_000, "held-out goals (never trained on), sampled policy", greedy=False
    ),
}


@torch.no_grad()
def evaluate(policy, env: EnvBase, greedy: bool = True, goal_types: tuple[str, ...] | None = None) -> dict[str, float]:
    """Runs one episode in every sub-environment of ``env`` (reset with its seed, so every
    evaluation sees the same scenes and goals) and returns the success rates.

    ``policy(td, greedy=greedy)`` writes "action". A sampled evaluation draws from its own random
    stream, seeded by the environment's seed: it is the same for every algorithm and leaves the
    training's stream untouched (adding it to a run does not change the run). Keys: "success",
    "success/<goal type>" for the types present (``goal_types``: the names of the environment's
    types, default Playground-Text's), "episode_length".
    """
    goal_types = get_environment().goal_types if goal_types is None else goal_types
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
