"""What the greedy policy and the critic do one step from the goal: runs a run's checkpoint greedily
on its own "train" evaluation episodes and, at every state of them, tries each legal candidate in a
copy of the environment (``state_dict`` / ``load_state_dict``) to find the ones that reach the goal
at once (reward 1) and the ones that change nothing (the same compact state after the step).

Per goal type, over the states with at least one winning candidate:

- ``states``: how many such states the greedy episodes visit (a looping episode revisits one each
  step);
- ``greedy_wins``: share where the actor's mode is a winning candidate;
- ``critic_wins``: share where the smaller Q-head's argmax is one;
- ``p_win``: the actor's mean probability on the winning candidates;
- ``q_win`` / ``q_greedy_else``: the critic's Q of the best winning candidate, and of the actor's
  choice where that choice does not win (its TD target would be at most gamma times a value <= 1,
  the winner's is exactly 1);
- ``greedy_no_op``: share of the actor's non-winning choices that change nothing;

and per episode, ``failed_episodes`` and ``failed_after_one_step``: how many greedy episodes fail,
and how many of those had reached a state one step from the goal.

    python experiments/cpu_full/critic/one_step_from_goal.py RUN_DIR_OR_CHECKPOINT [...]
"""

import sys
from pathlib import Path

import torch

from torchrl_glam.envs.playground import GOAL_TYPES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import greedy_choice, load_run_or_checkpoint, one_step_outcomes, train_evaluation_episodes  # noqa: E402

torch.set_num_threads(1)


COLUMNS = [
    "states",
    "greedy_wins",
    "critic_wins",
    "p_win",
    "q_win",
    "q_greedy_else",
    "greedy_no_op",
    "failed_episodes",
    "failed_after_one_step",
]
print("run,env_steps,goal_type," + ",".join(COLUMNS))
for run in sys.argv[1:]:
    cfg, agent, steps = load_run_or_checkpoint(run)
    env, td, goal_type = train_evaluation_episodes(cfg)
    num = env.num_envs
    rows = []  # one per (live env, step) one step from the goal
    ended, success, reached = (torch.zeros(num, dtype=torch.bool) for _ in range(3))
    for _ in range(env.max_steps):
        wins, no_op = one_step_outcomes(env, td)
        greedy, probs = greedy_choice(agent, td)
        q = agent.min_q_values(td).masked_fill(~td["action_mask"], float("-inf"))
        for i in range(num):
            if ended[i] or not wins[i].any():
                continue
            reached[i] = True
            g = int(greedy[i])
            rows.append(
                dict(
                    type=int(goal_type[i]),
                    greedy_wins=bool(wins[i, g]),
                    critic_wins=bool(wins[i, int(q[i].argmax())]),
                    p_win=float(probs[i][wins[i]].sum()),
                    q_win=float(q[i][wins[i]].max()),
                    q_greedy_else=None if wins[i, g] else float(q[i, g]),
                    greedy_no_op=None if wins[i, g] else bool(no_op[i, g]),
                )
            )
        td.set("action", greedy)
        nxt = env.step(td)["next"]
        success |= ~ended & nxt["terminated"].reshape(-1)
        ended |= nxt["done"].reshape(-1)
        td = nxt.exclude("reward", "done", "terminated", "truncated")
    for k, name in [(None, "all")] + list(enumerate(GOAL_TYPES)):
        chosen = [r for r in rows if k is None or r["type"] == k]
        episodes = torch.ones(num, dtype=torch.bool) if k is None else goal_type == k

        def mean(key):
            values = [float(r[key]) for r in chosen if r[key] is not None]
            return sum(values) / len(values) if values else float("nan")

        failed = episodes & ~success
        print(
            f"{run},{steps},{name},{len(chosen)},{mean('greedy_wins'):.3f},{mean('critic_wins'):.3f},"
            f"{mean('p_win'):.3f},{mean('q_win'):.3f},{mean('q_greedy_else'):.3f},{mean('greedy_no_op'):.3f},"
            f"{int(failed.sum())},{int((failed & reached).sum())}",
            flush=True,
        )
