"""What HER teaches a critic about a grasp goal's first step, on a trained run: the run's own
policy (sampled, as in training) plays 512 training episodes (goals as training samples them, 98%
sequential); every episode is relabeled as HER does it (``relabel_episodes``); among the relabeled
sections whose goal is a single grasp goal "Grasp D", this counts what their first step did, and
whether D names a supply (water, food). Those sections all end with reward 1: they are the
successes a critic learns a grasp goal's first step from.

    python experiments/cpu_full/hindsight/relabeled_first_steps.py RUN_DIR [RUN_DIR ...]
"""

import sys

import torch

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.data.her import relabel_episodes
from torchrl_glam.envs.playground import GOAL_TYPES

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1]))
from object_choice import is_supply, sampled_training_episodes, useful_actions  # noqa: E402

torch.set_num_threads(1)
print("run,env_steps,grasp_sections,first_step_goal_object,first_step_goal_object_a_supply,first_step_other")
for run_dir in sys.argv[1:]:
    cfg, agent, steps = load_trained_loss(run_dir)
    episodes, env = sampled_training_episodes(agent, cfg)
    sections = relabel_episodes(episodes)
    first = sections[:, 0]
    grasp = torch.as_tensor(env.catalogue.goal_type[first["goal_id"].numpy()] == GOAL_TYPES.index("grasp"))
    counts = [0, 0, 0]
    for i in grasp.nonzero().squeeze(-1).tolist():
        scene, action = first["objects"][i].tolist(), int(first["action"][i])
        if action not in useful_actions(env.catalogue, int(first["goal_id"][i]), scene, -1):
            counts[2] += 1
        elif is_supply(scene[action]):  # the goal names the supply it went to
            counts[1] += 1
        else:
            counts[0] += 1
    total = max(sum(counts), 1)
    print(
        f"{run_dir},{steps},{sum(counts)},{(counts[0] + counts[1]) / total:.3f},{counts[1] / total:.3f},"
        f"{counts[2] / total:.3f}",
        flush=True,
    )
