"""Do the hidden states the critic heads read carry the goal? On a run's final checkpoint (or, with
``--pretrained``, on the run's model before any update), for the states its sampled policy visits
in the run's "train" evaluation episodes: how far the heads' input moves when only the goal
changes (another episode's goal), against when only the state changes (another episode's scene
and state, the same goal). A ratio near 0 means the heads see nearly the same input whatever
the goal; the critic then cannot value the goal being pursued differently from another.

    python experiments/cpu_full/goal_in_hidden.py [--pretrained] RUN_DIR [RUN_DIR ...]
"""

import sys

import torch

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss, make_loss
from torchrl_glam.envs.playground import STATE_KEYS
from torchrl_glam.training.factories import act, make_eval_envs

torch.set_num_threads(1)
pretrained = "--pretrained" in sys.argv
print("run,env_steps,model,states,goal_change,state_change,ratio")
for run_dir in [a for a in sys.argv[1:] if a != "--pretrained"]:
    cfg, agent, steps = load_trained_loss(run_dir)
    env = make_eval_envs(cfg.replace(eval_sets=["train"]))["train"]
    visited = []
    with torch.no_grad():  # the states of the trained policy, sampled
        torch.manual_seed(0)
        env.set_seed(env.seed_value)
        td = env.reset()
        for _ in range(env.max_steps):
            visited.append(td.select(*STATE_KEYS).clone())
            act(agent, td, greedy=False)
            td = env.step(td)["next"].exclude("reward", "done", "terminated", "truncated")
    if pretrained:  # the same states through the model the run started from
        agent, steps = make_loss(cfg, num_actions=env.num_objects + 2), 0
    goal_change, state_change = [], []
    with torch.no_grad():
        for states in visited:
            hidden = agent.score(states)[agent.hidden_key]
            other_goal = states.clone().set("goal_id", states["goal_id"].roll(1, 0))
            other_state = states.apply(lambda x: x.roll(1, 0)).set("goal_id", states["goal_id"])
            goal_change.append((agent.score(other_goal)[agent.hidden_key] - hidden).norm(dim=-1).mean())
            state_change.append((agent.score(other_state)[agent.hidden_key] - hidden).norm(dim=-1).mean())
    g, s = torch.stack(goal_change).mean().item(), torch.stack(state_change).mean().item()
    print(
        f"{run_dir},{steps},{'pretrained' if pretrained else 'trained'},{len(visited) * env.num_envs},"
        f"{g:.4f},{s:.4f},{g / s:.3f}",
        flush=True,
    )
