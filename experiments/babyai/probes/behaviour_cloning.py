"""Probe: can the ``cpu_babyai`` agent's model imitate minigrid's BabyAI bot at all?

SAC-GLAM's runs on BabyAI-Text stay near the random policy. This separates "the RL recipe does
not find the behaviour" from "the model and prompt cannot express it": the same tiny T5 and the
same one-view prompt, trained by supervised cross-entropy on the actions of minigrid's
``BabyAIBot`` (an expert planner that succeeds on these levels), then evaluated greedily on the
run's own evaluation sets. If cloning an expert on 10k+ of its steps does not beat the random
policy, reinforcement learning with the same model and prompt is not expected to.

    python experiments/babyai/probes/behaviour_cloning.py --goal-types goto pickup \
        --episodes 2000 --updates 2000 --eval-every 500 --out experiments/babyai/probes/behaviour_cloning.csv
"""
from __future__ import annotations

import argparse
import csv
import time
from collections import Counter

import torch
from minigrid.utils.baby_ai_bot import BabyAIBot

from torchrl_glam.envs.babyai_text import ACTIONS
from torchrl_glam.envs.protocol import ACTION_MASK_KEY
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import make_env, make_eval_envs, make_glam_agent
from torchrl_glam.training.sac_config import make_config


def bot_steps(cfg, episodes: int) -> tuple[list, torch.Tensor, float]:
    """The bot's (compact state, action) pairs over ``episodes`` episodes of the training level,
    and its success rate (an episode stops early where the bot asks for an action the environment
    does not offer: minigrid's "done", or one the action mask forbids)."""
    env = make_env(cfg, num_envs=1, seed=cfg.seed + 50_000)
    keys = (*cfg.environment.state_keys, ACTION_MASK_KEY)
    states, actions, successes = [], [], 0
    for _ in range(episodes):
        td = env.reset()
        bot = BabyAIBot(env.envs[0])
        action = None
        for _ in range(cfg.max_steps):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goal-types", nargs="+", default=None, help="task kinds (default: all five)")
    parser.add_argument("--episodes", type=int, default=2000, help="bot episodes to clone")
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--history", type=int, default=0, help="past views in the prompt (GLAM: 2)")
    parser.add_argument("--out", default=None, help="CSV of the evaluations")
    args = parser.parse_args()

    cfg = make_config("cpu_babyai", {"seed": args.seed, "eval_sets": ["train", "held_out"],
                                     "goal_types": args.goal_types, "history": args.history})
    torch.manual_seed(args.seed)
    agent = make_glam_agent(cfg)
    environment = cfg.environment
    states, actions, bot_success = bot_steps(cfg, args.episodes)
    shares = Counter(actions.tolist())
    print(f"{len(actions)} bot steps from {args.episodes} episodes; bot success {bot_success:.3f}; actions: "
          + ", ".join(f"{ACTIONS[a]} {shares[a] / len(actions):.2f}" for a in sorted(shares)), flush=True)

    eval_envs = make_eval_envs(cfg)
    optimiser = torch.optim.Adam(agent.llm.parameters(), lr=args.lr)
    rows, accuracy, loss_sum, seen, start = [], 0.0, 0.0, 0, time.time()

    def log(update: int) -> None:
        agent.eval()
        row = {"updates": update, "seconds": round(time.time() - start, 1),
               "train_loss": round(loss_sum / max(seen, 1), 4), "train_accuracy": round(accuracy / max(seen, 1), 4)}
        for name, env in eval_envs.items():
            result = evaluate(agent.act, env, greedy=True, goal_types=environment.goal_types)
            row[name] = round(result["success"], 4)
        agent.train()
        rows.append(row)
        print(row, flush=True)

    generator = torch.Generator().manual_seed(args.seed)
    log(0)
    for update in range(1, args.updates + 1):
        index = torch.randint(len(actions), (args.batch_size,), generator=generator)
        batch = states[index]
        prompts, candidates = environment.render(batch)
        mask = batch[ACTION_MASK_KEY]
        scores, _, _ = agent.llm(prompts, candidates, mask)
        logits = scores.masked_fill(~mask, float("-inf"))
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
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
