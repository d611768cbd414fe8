"""Does the critic over-value the actions its policy takes? Compares, on a run's final checkpoint,
the critic's Q(s_t, a_t) (the smaller of the two heads) with the discounted return the agent then
actually gets from s_t, on the run's own "train" evaluation episodes (goal types uniform).

Q estimates the return of the sampled policy without a time limit (training bootstraps at a
truncation), so the episodes here run for ``HORIZON`` steps instead of 10 (gamma ** 30 < 0.05 of
the return is left out for the first 10 steps, the ones compared) and the policy is the actor's
sample, ``REPEATS`` times per episode. The greedy policy's rows are for information: Q is not its
value. ``mean_q_shuffled_goal``: Q of the same states and actions with another episode's goal in
the prompt (each episode takes the next one's): a critic that reads the goal values most of those
lower.

    python experiments/cpu_full/critic_calibration.py RUN_DIR [RUN_DIR ...]
"""

import sys

import torch

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.envs.playground import GOAL_TYPES, STATE_KEYS
from torchrl_glam.training.factories import act, make_eval_envs

HORIZON, COMPARED_STEPS, REPEATS = 40, 10, 4
torch.set_num_threads(1)


@torch.no_grad()
def rollout(agent, env, greedy: bool):
    """Q of each action taken ([2, E, HORIZON]: with the episode's goal, with the shuffled goal),
    and the rewards and ends of the episodes, [E, HORIZON] each."""
    env.set_seed(env.seed_value)
    td = env.reset()
    q_taken, rewards, ended = [], [], []
    done = torch.zeros(env.num_envs, dtype=torch.bool)
    for _ in range(HORIZON):
        q = agent.min_q_values(td.select(*STATE_KEYS))
        shuffled = td.select(*STATE_KEYS).set("goal_id", td["goal_id"].roll(1, 0))
        q_shuffled = agent.min_q_values(shuffled)
        act(agent, td, greedy=greedy)
        taken = td["action"].view(1, -1, 1).expand(2, -1, 1)
        q_taken.append(torch.stack([q, q_shuffled]).gather(-1, taken).squeeze(-1))
        out = env.step(td)["next"]
        rewards.append(out["reward"].squeeze(-1).float() * ~done)
        ended.append(done.clone())  # steps after the end of an episode are not compared
        done |= out["done"].squeeze(-1)
        td = out.exclude("reward", "done", "terminated", "truncated")
    return (
        torch.stack(q_taken, -1),
        torch.stack(rewards, 1),
        torch.stack(ended, 1),
        env.catalogue.goal_type[td["goal_id"].numpy()],
    )


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    returns, running = torch.zeros_like(rewards), torch.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns


print(
    "run,env_steps,policy,goal_type,compared_steps,mean_q,mean_return,q_minus_return,"
    "q_minus_return_failed_episodes,mean_q_shuffled_goal"
)
for run_dir in sys.argv[1:]:
    cfg, agent, steps = load_trained_loss(run_dir)
    env = make_eval_envs(cfg.replace(eval_sets=["train"], max_steps=HORIZON))["train"]
    for policy, repeats in (("sampled", REPEATS), ("greedy", 1)):
        rows = []
        for r in range(repeats):
            torch.manual_seed(r)
            q, rewards, ended, goal_type = rollout(agent, env, greedy=policy == "greedy")
            returns = discounted_returns(rewards, cfg.algorithm.gamma)
            success = rewards.sum(1) > 0
            rows.append(
                (
                    q[0, :, :COMPARED_STEPS],
                    q[1, :, :COMPARED_STEPS],
                    returns[:, :COMPARED_STEPS],
                    ended[:, :COMPARED_STEPS],
                    torch.as_tensor(goal_type),
                    success,
                )
            )
        q, q_shuffled, ret, ended, goal_type, success = (torch.cat(x) for x in zip(*rows))
        for k, name in [(None, "all")] + list(enumerate(GOAL_TYPES)):
            chosen = torch.ones_like(goal_type, dtype=torch.bool) if k is None else goal_type == k
            live = ~ended & chosen.unsqueeze(-1)
            failed = live & ~success.unsqueeze(-1)
            gap_failed = (q[failed] - ret[failed]).mean().item() if failed.any() else float("nan")
            print(
                f"{run_dir},{steps},{policy},{name},{int(live.sum())},{q[live].mean():.3f},{ret[live].mean():.3f},"
                f"{(q[live] - ret[live]).mean():.3f},{gap_failed:.3f},{q_shuffled[live].mean():.3f}",
                flush=True,
            )
