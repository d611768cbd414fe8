"""How much of the contrast "a grasp of the goal's object succeeds, of any other does not" a
SAC-GLAM batch holds: from a checkpoint's own replay, 100 batches drawn as its updates draw them
(its batch size and composition, its priorities), counted per batch:

- ``grasps``: transitions that grasp an object (the agent on it, its hand empty);
- ``grasp_goal_grasps``: those made under a grasp goal ("Grasp D"), where the contrast lives, and
  ``..._success`` / ``..._failure``: how many of them succeed at once (terminated after one step)
  and how many do not;
- ``immediate_successes``: every transition whose own action reached its goal (the
  immediate-success head's positives).

    python experiments/cpu_full/critic/batch_contrast.py RUN_DIR_OR_CHECKPOINT [...]
"""

import sys
from pathlib import Path

import numpy as np
import torch

from torchrl_glam.algorithms.sac_glam.build import make_replay
from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.envs.playground import GOAL_TYPES, GoalCatalogue
from torchrl_glam.training.checkpoint import load_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import as_run_dir  # noqa: E402

BATCHES = 100


torch.set_num_threads(1)
goal_type = torch.as_tensor(GoalCatalogue.default().goal_type)
columns = [
    "grasps",
    "grasp_goal_grasps",
    "grasp_goal_grasps_success",
    "grasp_goal_grasps_failure",
    "immediate_successes",
]
print("run,env_steps,batch_strategy,her_negatives,batch_size," + ",".join(columns))
for run in sys.argv[1:]:
    with as_run_dir(run) as run_dir:
        state = load_checkpoint(run_dir)
    cfg = SACGLAMConfig.from_dict(state["config"])
    replay = make_replay(cfg)
    replay.load_state_dict(state["replay"])
    totals = torch.zeros(len(columns))
    # each run's draws from seed 0: TorchRL's PrioritizedSampler draws with np.random, the rest torch
    torch.manual_seed(0)
    np.random.seed(0)
    for _ in range(BATCHES):
        batch = replay.sample(cfg.algorithm.batch_size)
        num_objects = batch["objects"].shape[-1]  # the candidates: "Go to" each object, "Grasp", "Release"
        grasp = (batch["action"] == num_objects) & (batch["agent_on"] >= 0) & (batch["held"] < 0)
        immediate = batch["next", "terminated"].reshape(-1) & (batch["steps_to_next_obs"].reshape(-1) == 1)
        under_grasp_goal = grasp & (goal_type[batch["goal_id"]] == GOAL_TYPES.index("grasp"))
        totals += torch.tensor(
            [
                grasp.sum(),
                under_grasp_goal.sum(),
                (under_grasp_goal & immediate).sum(),
                (under_grasp_goal & ~immediate).sum(),
                immediate.sum(),
            ],
            dtype=torch.float,
        )
    per_batch = totals / BATCHES
    print(
        f"{run},{state['assembler']['env_steps']},{cfg.replay.batch_strategy},{cfg.hindsight.her_negatives},{cfg.algorithm.batch_size},"
        + ",".join(f"{x:.2f}" for x in per_batch),
        flush=True,
    )
