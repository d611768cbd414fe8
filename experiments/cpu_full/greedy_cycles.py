"""Why greedy evaluation is below sampled evaluation: how many failed greedy episodes end in a
cycle, a state the deterministic policy had already been in (it then repeats the same actions until
the episode is truncated). Runs a run's final checkpoint on its own "train" evaluation episodes.

    python experiments/cpu_full/greedy_cycles.py RUN_DIR [RUN_DIR ...]
"""

import sys

import torch
from object_choice import train_evaluation_episodes

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.envs.playground import GOAL_TYPES
from torchrl_glam.envs.playground.transforms import STEP_STATE_KEYS
from torchrl_glam.training.factories import act

torch.set_num_threads(1)
print("run,env_steps,goal_type,episodes,success,failed_in_a_cycle,cycle_from_step")
for run_dir in sys.argv[1:]:
    cfg, agent, steps = load_trained_loss(run_dir)
    env, td, goal_type = train_evaluation_episodes(cfg)
    num = env.num_envs
    seen = [set() for _ in range(num)]
    success, ended, cycle = (torch.zeros(num, dtype=torch.bool) for _ in range(3))
    cycle_step = torch.zeros(num)  # the step (from 1) whose state was a revisit
    for t in range(env.max_steps):
        for i in range(num):  # the state the policy acts in; a revisit means a cycle
            key = tuple(tuple(td[k][i].flatten().tolist()) for k in STEP_STATE_KEYS)
            if not ended[i] and not cycle[i] and key in seen[i]:
                cycle[i], cycle_step[i] = True, t + 1
            seen[i].add(key)
        act(agent, td, greedy=True)
        out = env.step(td)["next"]
        success |= ~ended & out["terminated"].squeeze(-1)
        ended |= out["done"].squeeze(-1)
        td = out.exclude("reward", "done", "terminated", "truncated")
    for k, name in [(None, "all")] + list(enumerate(GOAL_TYPES)):
        chosen = torch.ones(num, dtype=torch.bool) if k is None else goal_type == k
        failed = chosen & ~success
        print(
            f"{run_dir},{steps},{name},{int(chosen.sum())},{success[chosen].float().mean():.3f},"
            f"{(failed & cycle).sum() / max(int(failed.sum()), 1):.3f},"
            f"{cycle_step[failed & cycle].mean():.1f}"
        )
