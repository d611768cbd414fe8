"""What a checkpoint's greedy policy does in its first steps (what a collapse looks like): runs it
on its own "train" evaluation episodes (goal types uniform) and prints, at each of the first
``--steps`` steps, how many of the episodes' greedy actions are a "Go to", a "Grasp" or a
"Release", and the actor's mean probability on its chosen action.

    python experiments/cpu_full/critic/greedy_actions.py RUN_DIR_OR_CHECKPOINT [...] [--steps 4]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import greedy_choice, load_run_or_checkpoint, train_evaluation_episodes  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("runs", nargs="+", help="run directories or checkpoint files")
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()
torch.set_num_threads(1)

print("run,env_steps,step,episodes,go_to,grasp,release,p_chosen")
for run in args.runs:
    cfg, agent, steps = load_run_or_checkpoint(run)
    env, td, _ = train_evaluation_episodes(cfg)
    grasp = td["action_mask"].shape[-1] - 2  # the candidates: "Go to" each object, "Grasp", "Release"
    live = torch.ones(env.num_envs, dtype=torch.bool)
    for t in range(args.steps):
        action, probs = greedy_choice(agent, td)
        chosen = probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)[live]
        a = action[live]
        print(
            f"{run},{steps},{t},{int(live.sum())},{int((a < grasp).sum())},{int((a == grasp).sum())},"
            f"{int((a > grasp).sum())},{chosen.mean():.3f}",
            flush=True,
        )
        td.set("action", action)
        nxt = env.step(td)["next"]
        live &= ~nxt["done"].reshape(-1)
        td = nxt.exclude("reward", "done", "terminated", "truncated")
