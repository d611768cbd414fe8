"""What a trained SAC-GLAM agent knows of "Grasp on the goal's object succeeds": its critic's
Q(s, Grasp) and, when the run has one (``success_loss_coef > 0``), its immediate-success head's
P(success | s, Grasp), on the states of ``capacity_probe.py`` (2,048 states of unseen scenes, a
training grasp goal, the agent on one object with an empty hand, half on an object the goal
names).

Printed per run: the mean Q and P where the object matches and where it does not (the latter split
into supplies and other objects), and each one's share of pairs ranked right (AUC: a matching
state above a non-matching one; 0.5 is chance). The exact values are Q = 1 and at most
gamma^3 = 0.73, P = 1 and 0.

    python experiments/cpu_full/critic/success_head_readout.py RUN_DIR_OR_CHECKPOINT [...]
"""

import argparse
import random
import sys
from pathlib import Path

import torch
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import grasp_states, load_run_or_checkpoint  # noqa: E402

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GoalCatalogue, PlaygroundTextEnv  # noqa: E402
from torchrl_glam.objectives.common import score_states  # noqa: E402
from torchrl_glam.objectives.sac_glam import SUCCESS_LOGIT_KEY  # noqa: E402

PLAYGROUND = get_environment("playground")  # the environment object the library takes

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("runs", nargs="+", help="run directories or checkpoint files")
parser.add_argument("--states", type=int, default=2048)
args = parser.parse_args()
torch.set_num_threads(1)
catalogue = GoalCatalogue.default()


def auc(values: torch.Tensor, match: torch.Tensor) -> float:
    """P(a matching state's value > a non-matching one's), ties half."""
    pos, neg = values[match], values[~match]
    greater = (pos[:, None] > neg[None, :]).float() + 0.5 * (pos[:, None] == neg[None, :]).float()
    return greater.mean().item()


print("run,env_steps,reading,match,nonmatch_supply,nonmatch_other,auc")
for run in args.runs:
    cfg, agent, steps = load_run_or_checkpoint(run)
    env = PlaygroundTextEnv(num_envs=256, goals="train", seed=778, text=False)  # capacity_probe's test scenes
    states, labels, supply = grasp_states(env, args.states, random.Random(0), catalogue)
    grasp = env.num_objects  # the candidates: "Go to" each object, "Grasp", "Release"
    readings = {"q_grasp": [], "p_success_grasp": []}
    with torch.no_grad():
        for i in range(0, args.states, 256):
            scored = TensorDict(
                score_states(agent.scorer, states[i : i + 256], environment=PLAYGROUND),
                batch_size=[min(256, args.states - i)],
            )
            readings["q_grasp"].append(agent.q_values(scored).min(0).values[:, grasp])
            if agent.success_head is not None:
                logits = agent.success_head(scored.select(agent.hidden_key))[SUCCESS_LOGIT_KEY]
                readings["p_success_grasp"].append(logits[:, grasp].sigmoid())
    match = labels.bool()
    for name, parts in readings.items():
        if not parts:
            continue
        values = torch.cat(parts)
        print(
            f"{run},{steps},{name},{values[match].mean():.3f},{values[~match & supply].mean():.3f},"
            f"{values[~match & ~supply].mean():.3f},{auc(values, match):.3f}",
            flush=True,
        )
