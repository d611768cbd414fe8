"""Can SAC-GLAM's critic (the cpu_full preset's tiny T5 and twin heads) learn the one-step fact a
grasp goal rests on: "Grasp" on an object that matches the goal succeeds, on any other object it
does not? A diagnostic on *oracle* labels, the critic's counterpart of
``hindsight/capacity_probe.py`` (the actor's first step).

States: a scene of the full task set, a training grasp goal that one of its objects matches, the
agent on one object with an empty hand; half of them on a matching object. Label: 1 if it matches.
The critic is trained as SAC-GLAM trains it (the LLM by ``--llm-lr``, Adam; the heads by the
preset's ``critic_lr``), by regression of both heads' Q(s, Grasp) on the label, on scenes of a seed
the evaluations do not use. Printed on 2,048 fresh states: the mean Q where the object matches and
where it does not, split by whether the object is a supply (water, food: what HER's successes
mostly name), and the share of states the smaller head puts on the right side of the labels'
midpoint. ``--negative-label`` sets the label of a mismatch (0 by default): SAC's own target
there is the discounted value of putting it right (grasp, release, go to, grasp): 0.73 at gamma 0.9.

With ``--action go_to`` the same states with the agent on nothing label Q(s, "Go to <that object>")
instead: the same fact, with the object named in the action's text rather than in the prompt.

    python experiments/cpu_full/critic/capacity_probe.py [--steps 600] [--llm-lr 3e-5] [--frozen-llm] [--action go_to]
"""

import argparse
import random
import sys
from pathlib import Path

import torch
from tensordict import TensorDict

from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs.playground import GoalCatalogue, PlaygroundTextEnv
from torchrl_glam.objectives.common import score_states

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import CPU_FULL, grasp_states, train_on_labels  # noqa: E402  (the actor's probe draws the same goals)

from torchrl_glam.envs import get_environment

PLAYGROUND = get_environment("playground")  # the environment object the library takes

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=600)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--llm-lr", type=float, default=3e-5, help="the preset's actor_lr variant (session 7)")
parser.add_argument("--frozen-llm", action="store_true", help="train the heads alone")
parser.add_argument("--model", default=None, help="another starting model than the preset's")
parser.add_argument(
    "--negative-label",
    type=float,
    default=0.0,
    help="the label where the object does not match: 0.73 (gamma^3) is its value at gamma 0.9 "
    "for an agent that then releases it, goes to the right object and grasps it",
)
parser.add_argument(
    "--action",
    default="grasp",
    choices=("grasp", "go_to"),
    help='go_to: the agent on nothing, the label on Q(s, "Go to" the object) instead',
)
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
rng = random.Random(0)
catalogue = GoalCatalogue.default()


cfg = make_config(CPU_FULL) if args.model is None else make_config(CPU_FULL).replace(model=args.model)
train_env = PlaygroundTextEnv(num_envs=256, goals="train", seed=777, text=False)  # not the evaluations' seeds
test_env = PlaygroundTextEnv(num_envs=256, goals="train", seed=778, text=False)
agent = make_loss(cfg, num_actions=train_env.num_objects + 2)
grasp = train_env.num_objects  # the candidates: "Go to" each object, "Grasp", "Release"
groups = agent.param_groups()
optimizers = [torch.optim.Adam(groups["heads"], lr=cfg.algorithm.critic_lr)]
if not args.frozen_llm:
    optimizers.append(torch.optim.Adam(groups["llm"], lr=args.llm_lr))


def q_labelled(td):
    """[heads, B]: Q(s, Grasp) on the object under the agent, or with ``--action go_to`` Q(s, Go to
    that object) with the agent on nothing (the object then named in the action's own text)."""
    if args.action == "go_to":
        td = td.clone()
        on, td["agent_on"] = td["agent_on"], torch.full_like(td["agent_on"], -1)
    scored = score_states(agent.scorer, td, environment=PLAYGROUND)
    q = agent.q_values(TensorDict(scored, batch_size=td.batch_size))
    if args.action == "go_to":
        return q.gather(-1, on.expand(q.shape[0], -1).unsqueeze(-1)).squeeze(-1)
    return q[..., grasp]


test, test_labels, test_supply = grasp_states(test_env, 2048, rng, catalogue)


def batch_loss(step):
    td, labels, _ = grasp_states(train_env, args.batch_size, rng, catalogue)
    return (q_labelled(td) - (labels + (1 - labels) * args.negative_label)).pow(2).mean()


train_on_labels(optimizers, batch_loss, args.steps)

with torch.no_grad():
    q = torch.cat([q_labelled(test[i : i + 256]).min(0).values for i in range(0, len(test), 256)])
match, supply = test_labels.bool(), test_supply
cells = {
    "match": match,
    "match_supply": match & supply,
    "nonmatch": ~match,
    "nonmatch_supply": ~match & supply,
    "nonmatch_other": ~match & ~supply,
}
print("probe,steps,llm_lr," + ",".join(f"q_{k}" for k in cells) + ",accuracy")
threshold = (1 + args.negative_label) / 2
label = (
    f"critic_{args.action}"
    + ("_frozen_llm" if args.frozen_llm else "")
    + (f"_negative{args.negative_label}" if args.negative_label else "")
)
print(
    f"{label},{args.steps},{0 if args.frozen_llm else args.llm_lr},"
    + ",".join(f"{q[m].mean():.3f}" for m in cells.values())
    + f",{((q > threshold) == match).float().mean():.3f}"
)
