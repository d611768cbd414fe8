"""Probe: can the ``cpu_babyai`` agent's model imitate minigrid's BabyAI bot at all?

SAC-GLAM's runs on BabyAI-Text stay near the random policy. This separates "the RL recipe does
not find the behaviour" from "the model and prompt cannot express it": the same tiny T5 and the
same one-view prompt, trained by supervised cross-entropy on the actions of minigrid's
``BabyAIBot`` (an expert planner that succeeds on these levels), then evaluated greedily on the
run's own evaluation sets. If cloning an expert on 10k+ of its steps does not beat the random
policy, reinforcement learning with the same model and prompt is not expected to.

``--model mlp`` clones the same steps with a small network over the compact state instead (the
one-hot 7x7 view, what is carried, an embedding of the goal's id; the same single view as the
prompt): what a memoryless policy with a plain encoding of this information can reach;
``--model mlp_goalless`` the same without the goal: how far the view alone predicts the bot.
``--width W`` clones with a randomly initialised T5 of d_model W (``--layers`` layers in the encoder
and in the decoder, default 2; 4 heads) in BabyAI-Text's vocabulary in place of the preset's
pretrained 64-wide one; ``--set`` overrides the preset's fields (e.g. ``--set model=smollm2-135m
lora_rank=16 eval_episodes=32``); ``--save DIR`` keeps the cloned LLM, which a training run then
starts from (``model=DIR``).

    python experiments/babyai/probes/behaviour_cloning.py --goal-types goto pickup \
        --episodes 2000 --updates 2000 --eval-every 500 --out experiments/babyai/probes/behaviour_cloning.csv

The command of every committed CSV is in experiments/babyai/README.md (session 35).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from collections import Counter

import torch
from minigrid.utils.baby_ai_bot import BabyAIBot
from tensordict import TensorDictBase
from torch import nn

from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides
from torchrl_glam.envs import ACTION_MASK_KEY, get_environment
from torchrl_glam.envs.babyai.text import ACTIONS
from torchrl_glam.offline.tiny import build_tiny_model
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import make_env, make_eval_envs, make_glam_agent


def bot_steps(cfg, episodes: int) -> tuple[TensorDictBase, torch.Tensor, float]:
    """The bot's (compact state, action) pairs over ``episodes`` episodes of the training level,
    and its success rate (an episode stops early where the bot asks for an action the environment
    does not offer: minigrid's "done", or one the action mask forbids)."""
    env = make_env(cfg, num_envs=1, seed=cfg.run.seed + 50_000)
    keys = (*cfg.environment.state_keys, ACTION_MASK_KEY)
    states, actions, successes = [], [], 0
    for _ in range(episodes):
        td = env.reset()
        bot = BabyAIBot(env.envs[0])
        action = None
        for _ in range(cfg.env.max_steps):
            action = int(bot.replan(action))
            if action >= len(ACTIONS) or not bool(td[ACTION_MASK_KEY][0, action]):
                break
            states.append(td.select(*keys).clone())
            actions.append(action)
            td["action"] = torch.tensor([action])
            out = env.step(td)["next"]
            if bool(out["done"].any()):
                successes += int(out["reward"].sum() > 0)
                break
            td = out.exclude("reward", "done", "terminated", "truncated")
    return torch.cat(states), torch.tensor(actions), successes / episodes


def distinct_inputs(states, environment) -> tuple[int, int, int]:
    """Distinct prompts, distinct (view, carried, goal) and distinct pairs of both among the bot's
    steps: three equal counts mean the text tells apart exactly the steps the view does."""
    prompts, _ = environment.render(states)
    views = [
        (states["image"][i].numpy().tobytes(), tuple(states["carrying"][i].tolist()), int(states["goal_id"][i]))
        for i in range(len(prompts))
    ]
    return len(set(prompts)), len(set(views)), len(set(zip(prompts, views)))


class ViewPolicy(nn.Module):
    """A memoryless policy over the compact state: one-hot view cells (object, colour, state),
    one-hot carried object, an embedding of the goal id; masked logits over the six actions."""

    def __init__(self, num_goals: int, width: int = 256, goal: bool = True) -> None:
        super().__init__()
        self.goal = nn.Embedding(num_goals, 64)
        self.reads_goal = goal
        self.net = nn.Sequential(
            nn.Linear(7 * 7 * 20 + 12 + 7 + 64, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, len(ACTIONS)),
        )

    def forward(self, state) -> torch.Tensor:
        image = state["image"].long()
        cells = (
            torch.cat(
                [
                    nn.functional.one_hot(image[..., 0], 11),
                    nn.functional.one_hot(image[..., 1], 6),
                    nn.functional.one_hot(image[..., 2], 3),
                ],
                -1,
            )
            .flatten(1)
            .float()
        )
        carrying = state["carrying"] + 1  # -1: nothing
        carried = torch.cat([nn.functional.one_hot(carrying[:, 0], 12), nn.functional.one_hot(carrying[:, 1], 7)], -1)
        goal = self.goal(state["goal_id"]) * self.reads_goal
        logits = self.net(torch.cat([cells, carried.float(), goal], -1))
        return logits.masked_fill(~state[ACTION_MASK_KEY], float("-inf"))

    @torch.no_grad()
    def act(self, td, greedy: bool = True):
        logits = self(td)
        action = logits.argmax(-1) if greedy else torch.distributions.Categorical(logits=logits).sample()
        td.set("action", action)
        return td


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        choices=("llm", "mlp", "mlp_goalless"),
        default="llm",
        help="the cpu_babyai agent's LLM, or a small network over the compact state",
    )
    parser.add_argument(
        "--width", type=int, default=None, help="a random-init tiny T5 of this d_model in place of the preset's model"
    )
    parser.add_argument("--layers", type=int, default=2, help="with --width: the tiny T5's layers")
    parser.add_argument("--goal-types", nargs="+", default=None, help="task kinds (default: all five)")
    parser.add_argument("--episodes", type=int, default=2000, help="bot episodes to clone")
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--history", type=int, default=0, help="past views in the prompt (GLAM: 2)")
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="the preset's fields to override")
    parser.add_argument("--out", default=None, help="CSV of the evaluations")
    parser.add_argument(
        "--save",
        default=None,
        metavar="DIR",
        help="with --model llm: save the cloned model and its tokenizer there (a training run's model=DIR)",
    )
    args = parser.parse_args()
    if args.save and args.model != "llm":
        parser.error("--save saves the LLM: use it with --model llm")

    overrides = {
        "seed": args.seed,
        "eval_sets": ["train", "held_out"],
        "goal_types": args.goal_types,
        "history": args.history,
        **parse_overrides(args.set),
    }
    workdir = tempfile.TemporaryDirectory()  # the --width model's files, removed at exit
    if args.width:
        wide = build_tiny_model(
            workdir.name,
            "t5",
            seed=args.seed,
            environment=get_environment("babyai"),
            d_model=args.width,
            d_kv=args.width // 4,
            d_ff=2 * args.width,
            num_layers=args.layers,
        )
        overrides["model"] = str(wide)
    cfg = make_config("cpu_babyai", overrides)
    torch.manual_seed(args.seed)
    agent = make_glam_agent(cfg)
    environment = cfg.environment
    states, actions, bot_success = bot_steps(cfg, args.episodes)
    shares = Counter(actions.tolist())
    print(
        f"{len(actions)} bot steps from {args.episodes} episodes; bot success {bot_success:.3f}; actions: "
        + ", ".join(f"{ACTIONS[a]} {shares[a] / len(actions):.2f}" for a in sorted(shares)),
        flush=True,
    )

    if args.model == "llm":
        policy, act = agent.llm, agent.act

        def logits_of(batch):
            prompts, candidates = environment.render(batch)
            mask = batch[ACTION_MASK_KEY]
            scores, _, _ = agent.llm(prompts, candidates, mask)
            return scores.masked_fill(~mask, float("-inf"))
    else:
        policy = logits_of = ViewPolicy(len(environment.catalogue), goal=args.model == "mlp")
        act = policy.act

    print(
        "distinct prompts, views, (prompt, view) pairs: %d, %d, %d" % distinct_inputs(states, environment), flush=True
    )
    eval_envs = make_eval_envs(cfg)
    optimiser = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=args.lr)
    rows, accuracy, loss_sum, seen, start = [], 0.0, 0.0, 0, time.time()

    def log(update: int) -> None:
        policy.eval()
        row = {
            "updates": update,
            "seconds": round(time.time() - start, 1),
            "train_loss": round(loss_sum / max(seen, 1), 4),
            "train_accuracy": round(accuracy / max(seen, 1), 4),
        }
        for name, env in eval_envs.items():
            result = evaluate(act, env, greedy=True, goal_types=environment.goal_types)
            row[name] = round(result["success"], 4)
        policy.train()
        rows.append(row)
        print(row, flush=True)

    generator = torch.Generator().manual_seed(args.seed)
    log(0)
    for update in range(1, args.updates + 1):
        index = torch.randint(len(actions), (args.batch_size,), generator=generator)
        logits = logits_of(states[index])
        loss = torch.nn.functional.cross_entropy(logits, actions[index])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        loss_sum += loss.item()
        accuracy += (logits.argmax(-1) == actions[index]).float().mean().item()
        seen += 1
        if update % args.eval_every == 0:
            log(update)
            loss_sum, accuracy, seen = 0.0, 0.0, 0
    if args.save:
        model = agent.llm.model
        model = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model  # LoRA folded in
        model.save_pretrained(args.save)
        agent.llm.tokenizer.save_pretrained(args.save)
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
