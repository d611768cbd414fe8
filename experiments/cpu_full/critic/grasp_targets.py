"""Which "Grasp" steps does SAC-GLAM+HER's critic learn from, and how often do they succeed? On a
trained run, its own policy (sampled, as in training) plays 512 training episodes (goals as
training samples them); every episode is relabeled as the run's HER does it (hindsight negatives
included when the run has them; ``--her-negatives N --her-negatives-from scene`` sets them). Among the
steps that grasp an object (the agent on it, its hand empty), this counts, for the original
episodes and for HER's relabeled sections apart:

- ``grasps``: how many there are, and ``per_step``: their share of that part's steps;
- ``success``: the share that complete the step's goal (reward 1; a relabeled section ends with
  the grasp that reached its goal), and ``on_supply``: the share made on a supply (water, food);
- ``success_on_supply`` / ``success_elsewhere``: the success share of grasps on a supply and on
  any other object.

The ``*_grasp_goals`` rows count only the grasps made under a grasp goal ("Grasp D"): the contrast
a critic needs there (a grasp of D succeeds, of anything else does not). HER's relabeled grasp
goals are the goals those grasps achieved, so they are all successes; the failures come from the
task set's few grasp goals (2% of training goals) and from hindsight negatives (``her_negatives``).

The ``batch`` row weighs the two parts as a batch at ``her_ratio`` draws them (uniformly within
each part; prioritized replay moves this): among the batch's grasps, the share that succeed. A
critic that does not read whether the object matches the goal can fit most of those targets by
the action alone.

    python experiments/cpu_full/critic/grasp_targets.py RUN_DIR_OR_CHECKPOINT [...] [--her-negatives N]
"""

import argparse
import sys
from pathlib import Path

import torch

from torchrl_glam.algorithms.sac_glam.build import make_episode_processing
from torchrl_glam.envs.playground import GOAL_TYPES, GoalCatalogue

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import is_supply, load_run_or_checkpoint, sampled_training_episodes  # noqa: E402

torch.set_num_threads(1)


def grasp_steps(steps, num_objects: int, grasp_goals_only: bool = False):
    """(grasps [N] bool, success [N] bool, on a supply [N] bool, steps N) of a padded batch [E, T]
    (``grasp_goals_only``: grasps under a grasp goal only)."""
    valid = steps["mask"]
    on, held = steps["agent_on"].squeeze(-1), steps["held"].squeeze(-1)
    grasp = valid & (steps["action"] == num_objects) & (on >= 0) & (held < 0)
    if grasp_goals_only:
        goal_type = torch.as_tensor(GoalCatalogue.default().goal_type)[steps["goal_id"].squeeze(-1)]
        grasp &= goal_type == GOAL_TYPES.index("grasp")
    success = steps["next", "reward"].squeeze(-1) > 0
    objects = steps["objects"]
    supply = torch.zeros_like(grasp)
    for e, t in grasp.nonzero().tolist():
        supply[e, t] = is_supply(int(objects[e, t, int(on[e, t])]))
    return grasp[valid], success[valid], supply[valid], int(valid.sum())


def shares(grasp, success, supply, total):
    g = max(int(grasp.sum()), 1)
    s, o = max(int((grasp & supply).sum()), 1), max(int((grasp & ~supply).sum()), 1)
    return (
        int(grasp.sum()),
        grasp.sum() / total,
        (grasp & success).sum() / g,
        (grasp & supply).sum() / g,
        (grasp & supply & success).sum() / s,
        (grasp & ~supply & success).sum() / o,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories or kept checkpoint files")
    parser.add_argument("--her-negatives", type=int, default=None, help="instead of the run's her_negatives")
    parser.add_argument("--her-negatives-from", default=None, help="instead of the run's her_negatives_from")
    args = parser.parse_args()
    print("run,env_steps,part,grasps,per_step,success,on_supply,success_on_supply,success_elsewhere")
    for run_dir in args.runs:
        cfg, agent, steps = load_run_or_checkpoint(run_dir)
        if args.her_negatives is not None:
            cfg = cfg.replace(her_negatives=args.her_negatives)
        if args.her_negatives_from is not None:
            cfg = cfg.replace(her_negatives_from=args.her_negatives_from)
        episodes, env = sampled_training_episodes(agent, cfg)
        her, _, _ = make_episode_processing(cfg)
        relabeled = her(episodes)[len(episodes) :]
        parts = {
            "original": grasp_steps(episodes, env.num_objects),
            "relabeled": grasp_steps(relabeled, env.num_objects),
        }
        rows = {name: shares(*part) for name, part in parts.items()}
        for name, part in (("original", episodes), ("relabeled", relabeled)):
            row = shares(*grasp_steps(part, env.num_objects, grasp_goals_only=True))
            print(
                f"{run_dir},{steps},{name}_grasp_goals,{row[0]}," + ",".join(f"{float(x):.3f}" for x in row[1:]),
                flush=True,
            )
        for name, row in rows.items():
            print(f"{run_dir},{steps},{name},{row[0]}," + ",".join(f"{float(x):.3f}" for x in row[1:]), flush=True)
        # a batch: her_ratio of it relabeled steps, the rest original steps, each drawn uniformly
        weight = {"relabeled": cfg.hindsight.her_ratio, "original": 1 - cfg.hindsight.her_ratio}
        grasps = sum(weight[n] * float(rows[n][1]) for n in rows)
        success = sum(weight[n] * float(rows[n][1]) * float(rows[n][2]) for n in rows)
        print(f"{run_dir},{steps},batch,,{grasps:.3f},{success / max(grasps, 1e-9):.3f},,,", flush=True)
