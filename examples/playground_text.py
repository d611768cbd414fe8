"""Playground-Text in TorchRL: one episode printed step by step, then random-play success rates.

    python examples/playground_text.py [--goals train|simplified|held_out] [--episodes 2000]

The environment is a batched ``EnvBase``: every TorchRL piece (transforms, collectors, batched
envs) works on it. A random policy that respects the action mask succeeds on ~32% of simplified
episodes and ~1% of the full task set (spec, "Social partner and reward").
"""

import argparse

import torch
from torchrl.envs import RewardSum, StepCounter, TransformedEnv
from torchrl.modules import MaskedCategorical

from torchrl_glam.envs.playground import GOAL_TYPES, PlaygroundTextEnv


def random_policy(td):
    """Uniform over the valid candidate actions."""
    mask = td["action_mask"]
    return td.set("action", MaskedCategorical(logits=torch.zeros(mask.shape), mask=mask).sample())


def show_one_episode(goals: str, seed: int) -> None:
    env = PlaygroundTextEnv(num_envs=1, goals=goals, seed=seed)
    torch.manual_seed(seed)
    td = env.reset()
    for _ in range(env.max_steps):
        print(td["prompt"][0])
        random_policy(td)
        print(f"-> {td['actions'][0][td['action'].item()]}")
        td = env.step(td)["next"]
        if td["achieved_goals"][0]:
            print(f"   social partner: {', '.join(td['achieved_goals'][0])}")
        print(f"   reward {td['reward'].item():.0f}\n")
        if td["done"].item():
            break
        td = td.exclude("reward", "done", "terminated", "truncated")


def random_success(goals: str, episodes: int, seed: int) -> None:
    env = TransformedEnv(PlaygroundTextEnv(num_envs=episodes, goals=goals, seed=seed, text=False), StepCounter())
    env.append_transform(RewardSum())
    torch.manual_seed(seed)
    # max_steps steps: every sub-environment ends its first episode (done ones are reset and go on)
    data = env.rollout(env.base_env.max_steps, random_policy, break_when_any_done=False)
    first_end = data["next", "done"][..., 0].float().argmax(dim=1)
    success = data["next", "episode_reward"][torch.arange(episodes), first_end, 0]
    types = env.base_env.catalogue.goal_type[data["goal_id"][:, 0].numpy()]
    print(f"random play on {goals!r} goals, {episodes} episodes: success {success.mean():.1%}")
    for k, name in enumerate(GOAL_TYPES):
        chosen = torch.as_tensor(types == k)
        if chosen.any():
            print(f"  {name:>16}: {success[chosen].mean():.1%} of {int(chosen.sum())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--goals", default="simplified", choices=["train", "simplified", "held_out"])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    show_one_episode(args.goals, args.seed)
    random_success(args.goals, args.episodes, args.seed)
