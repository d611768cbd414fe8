"""Does the agent go to the object the goal names, where that choice decides the episode? On a run's
final checkpoint, with its greedy actor on 1,024 "train" episodes (goal types uniform, drawn as the
run's own evaluation draws its 128), at two kinds of states:

- ``grasp_first_step``: a grasp goal "Grasp D", first step (on nothing, empty hand). The useful
  actions are "Go to" an object matching D.
- ``grow_holding_supply``: a goal that starts with "Grow D" (grow, grow-then-grasp,
  grow-then-grow), the first state where the agent holds a supply and nothing has grown yet. The
  useful actions are "Go to" a living thing matching D that the held supply feeds.

The first step of a Grow goal is left out: "Go to water" starts a shortest solution of almost
every Grow goal, so a policy that ignores D gets it right. Each row gives the share of those states
where the choice is useful for the actor's greedy action, for the critic's (argmax over the legal
candidates of the smaller Q-head) and for a uniformly random legal action (expected share), and
the share where the actor goes to a supply (water or food) instead of choosing by the goal.

    python docs/results/cpu_full/object_choice.py RUN_DIR [RUN_DIR ...]
"""
import sys

import numpy as np
import torch

from torchrl_glam.envs import GOAL_TYPES, OBJECT_NAMES
from torchrl_glam.envs.rules import feeds
from torchrl_glam.training.factories import act, make_eval_envs
from torchrl_glam.training.sac import load_trained_agent

EPISODES = 1024  # the run's own evaluation episodes are 128 (32 per goal type): more, for a tighter share
torch.set_num_threads(1)


def useful_actions(catalogue, goal_id: int, scene: list[int], held: int) -> set[int]:
    """The "Go to" candidates (scene positions) that match the goal's first part: any matching object
    for "Grasp D"; for "Grow D", the matching living things that the held object feeds."""
    verb, description = catalogue.single_part_descriptions[catalogue.parts[goal_id, 0]]
    names = catalogue.matching_objects(description, growable_only=verb == "Grow")
    matching = [i for i, o in enumerate(scene) if OBJECT_NAMES[o] in names]
    if verb == "Grasp":
        return set(matching)
    return {i for i in matching if feeds(np.array([scene[held]]), np.array([scene[i]]))[0]}


@torch.no_grad()
def choices(agent, env):
    """{state kind: [(actor useful, critic useful, random's expected share, actor to a supply), ...]}."""
    env.set_seed(env.seed_value)
    td = env.reset()
    is_grasp = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()] == GOAL_TYPES.index("grasp"))
    supply = torch.as_tensor([[OBJECT_NAMES[o].split(" ")[1] in ("water", "food") for o in scene]
                              for scene in td["objects"].tolist()])
    measured = torch.zeros(env.num_envs, dtype=torch.bool)
    done = torch.zeros(env.num_envs, dtype=torch.bool)
    rows = {"grasp_first_step": [], "grow_holding_supply": []}
    for t in range(env.max_steps):
        held = td["held"]
        holding_supply = (held >= 0) & supply.gather(1, held.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        kind = torch.where(is_grasp, t == 0, holding_supply & ~td["grown"].any(-1))
        kind &= ~measured & ~done
        critic = agent.min_q_values(td).masked_fill(~td["action_mask"], float("-inf")).argmax(-1)
        actor = act(agent, td, greedy=True)["action"]
        for i in kind.nonzero().squeeze(-1).tolist():
            useful = useful_actions(env.catalogue, int(td["goal_id"][i]), td["objects"][i].tolist(), int(held[i]))
            to_supply = int(actor[i]) < supply.shape[1] and bool(supply[i, int(actor[i])])
            rows["grasp_first_step" if is_grasp[i] else "grow_holding_supply"].append(
                (int(actor[i]) in useful, int(critic[i]) in useful, len(useful) / int(td["action_mask"][i].sum()),
                 to_supply))
        measured |= kind
        out = env.step(td)["next"]
        done |= out["done"].squeeze(-1)
        td = out.exclude("reward", "done", "terminated", "truncated")
    return rows


print("run,env_steps,state,states,actor_greedy,critic_greedy,random,actor_to_supply")
for run_dir in sys.argv[1:]:
    cfg, agent, steps = load_trained_agent(run_dir)
    env = make_eval_envs(cfg.replace(eval_sets=["train"], eval_episodes=EPISODES))["train"]
    for kind, values in choices(agent, env).items():
        shares = (np.mean(x) for x in zip(*values)) if values else (float("nan"),) * 4
        print(f"{run_dir},{steps},{kind},{len(values)}," + ",".join(f"{x:.3f}" for x in shares), flush=True)
