"""Can the 64-wide tiny T5 represent a grasp goal's object choice among 6 objects at all? A
diagnostic, not a pretraining recipe: it trains the model on *oracle* labels (the prompt of a grasp
goal's first step -> "Go to <an object matching the goal>"), which no agent here is given, and
measures the greedy first step of ``object_choice.py --zero-shot`` on the comparison's own
evaluation episodes. If the model learns it, its size is not what keeps the agents at chance.

    python experiments/cpu_full/hindsight/capacity_probe.py [--start offline:tiny-t5-pretrained] [--steps 300] [--out DIR]
"""

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from torchrl_glam.envs.playground import GoalCatalogue, PlaygroundTextEnv, render_batch
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES
from torchrl_glam.modules import LLMConfig, load_llm
from torchrl_glam.offline.pretraining import lm_batch
from torchrl_glam.offline.tiny import save_model_and_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import training_grasp_goal  # noqa: E402  (the critic's probe draws the same goals)

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--start", default="offline:tiny-t5-pretrained")
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="keep the trained model in this directory")
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
rng = random.Random(0)
catalogue = GoalCatalogue.default()
env = PlaygroundTextEnv(num_envs=256, goals="train", seed=777, text=False)  # not the evaluation's seeds


def batch(size):
    prompts, targets = [], []
    while len(prompts) < size:
        td = env.reset()
        for objects in td["objects"].tolist():
            goal, positions = training_grasp_goal(catalogue, objects, rng)
            matching = [OBJECT_NAMES[objects[i]] for i in positions]
            prompt = render_batch([catalogue.id_of(goal)], [objects], [-1], [-1], [[False] * len(objects)], catalogue)[
                0
            ][0]
            prompts.append(prompt)
            targets.append(f"Go to {rng.choice(matching)}")
    return prompts[:size], targets[:size]


llm = load_llm(LLMConfig(args.start))
model, tokenizer = llm.model, llm.tokenizer
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(1, args.steps + 1):
    loss = model(**lm_batch(tokenizer, *batch(args.batch_size), True)).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step}: loss {loss.item():.3f}", file=sys.stderr, flush=True)
with tempfile.TemporaryDirectory() as directory:
    out = save_model_and_tokenizer(model, tokenizer, args.out or Path(directory) / "model")
    result = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parents[1] / "object_choice.py"),
            "--zero-shot",
            str(out),
            "--episodes",
            "1024",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
for line in result.stdout.splitlines():
    if line.startswith("zero_shot"):
        print(f"oracle-labels:{args.start}:{args.steps}," + line.split(",", 1)[1])
