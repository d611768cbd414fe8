"""What a finished SAC-GLAM run's policy does on BabyAI-Text: its last checkpoint, acting greedily
and sampled on 64 episodes of its own training evaluation set, counted by action.

    python experiments/babyai/greedy_actions.py RUN_DIR

Prints, per mode, the success rate, each action's share of the steps taken, and the share of steps
that repeat the step before's action (a policy without memory that repeats itself in an unchanged
view, e.g. "go forward" into a wall, loops for the rest of the episode).
"""

from __future__ import annotations

import collections
import sys

import torch

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.envs import step_success
from torchrl_glam.envs.babyai.text import ACTIONS
from torchrl_glam.training.factories import act, make_eval_envs


def rollout(agent, env, max_steps: int, greedy: bool) -> tuple[float, dict[str, float], float]:
    td = env.reset()
    episodes = env.batch_size[0]
    ended, success = torch.zeros(episodes, dtype=torch.bool), torch.zeros(episodes, dtype=torch.bool)
    counts, repeats, taken, previous = collections.Counter(), 0, 0, None
    for _ in range(max_steps):
        act(agent, td, greedy=greedy)
        action, alive = td["action"], ~ended
        counts.update(ACTIONS[a] for a in action[alive].tolist())
        if previous is not None:
            repeats += int(((action == previous) & alive).sum())
        taken += int(alive.sum())
        previous = action.clone()
        following = env.step(td)["next"]
        success |= step_success(following).squeeze(-1) & alive
        ended |= following["done"].squeeze(-1)
        if ended.all():
            break
        td = following.exclude("reward", "done", "terminated", "truncated")
    return success.float().mean().item(), {a: n / taken for a, n in counts.most_common()}, repeats / taken


def main(run_dir: str) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the sampled actions' draws
    cfg, agent, steps = load_trained_loss(run_dir)
    cfg = cfg.replace(eval_sets=["train"], eval_episodes=64)  # only the set it rolls out
    print(f"{run_dir} at {steps} environment steps")
    for greedy in (True, False):
        success, shares, repeated = rollout(agent, make_eval_envs(cfg)["train"], cfg.env.max_steps, greedy)
        print(
            f"{'greedy' if greedy else 'sampled'}: success {success:.3f}; actions "
            + ", ".join(f"{a} {s:.2f}" for a, s in shares.items())
            + f"; same action as the step before {repeated:.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
