"""Is the greedy policy's plateau the critic's or the actor's? Evaluates a run's final checkpoint on
its own "train" evaluation episodes three ways: the actor's mode (the run's greedy evaluation), a
sample of the actor (its sampled evaluation), and the critic's greedy policy (argmax over the legal
candidates of the smaller of the two Q-heads).

    python experiments/cpu_full/critic_greedy.py RUN_DIR [RUN_DIR ...]
"""

import sys

import torch

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import act, make_eval_envs

torch.set_num_threads(1)


@torch.no_grad()
def critic_greedy(agent, td, greedy=True):
    q = agent.min_q_values(td)
    td.set("action", q.masked_fill(~td["action_mask"], float("-inf")).argmax(-1))
    return td


print("run,env_steps,policy,success,grasp,grow,grow-then-grasp,grow-then-grow")
for run_dir in sys.argv[1:]:
    cfg, agent, steps = load_trained_loss(run_dir)
    env = make_eval_envs(cfg.replace(eval_sets=["train"]))["train"]
    policies = {
        "actor_greedy": (lambda td, greedy: act(agent, td, greedy), True),
        "actor_sampled": (lambda td, greedy: act(agent, td, greedy), False),
        "critic_greedy": (lambda td, greedy: critic_greedy(agent, td), True),
    }
    for name, (policy, greedy) in policies.items():
        r = evaluate(policy, env, greedy=greedy)
        print(
            f"{run_dir},{steps},{name},{r['success']:.3f},"
            + ",".join(f"{r['success/' + t]:.2f}" for t in ("grasp", "grow", "grow-then-grasp", "grow-then-grow")),
            flush=True,
        )
