"""What the greedy policy of a SAC-GLAM checkpoint does on the "train" evaluation episodes: where
it fails, whether it loops on an action that changes nothing, the gap between its two best
scores, and what the critic says of the actions there.

    python -m experiments.collapse.probe RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds a checkpoint.pt and config.json (a copy of a run folder at one step).
"""

from __future__ import annotations

import argparse
import json

import torch
from tensordict import TensorDict

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.training.factories import make_eval_envs


@torch.no_grad()
def scores_and_q(loss, state) -> tuple[torch.Tensor, torch.Tensor]:
    """The actor's scores and the smaller head's Q-values [B, A] of compact states, -inf where
    masked: one scoring pass for both (``loss.min_q_values`` scores again)."""
    scored = loss.score(state)
    hidden = TensorDict({k: scored[k] for k in loss.head_keys}, batch_size=state.batch_size)
    masked = ~state["action_mask"]
    q = loss.q_values(hidden).min(0).values
    return scored["action_scores"].masked_fill(masked, -torch.inf), q.masked_fill(masked, -torch.inf)


def train_episodes(cfg):
    """The "train" evaluation environment, reset to its fixed episodes, and its first observation."""
    env = make_eval_envs(cfg)["train"]
    env.set_seed(env.seed_value)
    return env, env.reset()


@torch.no_grad()
def probe(run_dir: str, trained=None) -> dict:
    """``trained``: ``load_trained_loss(run_dir)`` when the caller has it already."""
    cfg, loss, steps = trained or load_trained_loss(run_dir)
    environment = cfg.environment
    env, td = train_episodes(cfg)
    B = env.num_envs
    ended, success = torch.zeros(B, dtype=torch.bool), torch.zeros(B, dtype=torch.bool)
    rows = []
    for t in range(env.max_steps):
        state = td.select(*environment.state_keys, "action_mask")
        scores, q = scores_and_q(loss, state)
        top2 = scores.topk(2, dim=-1)
        greedy = top2.indices[:, 0]
        noop = environment.noop_actions(state)
        probs = scores.softmax(-1)
        for b in range(B):
            if ended[b]:
                continue
            rows.append(
                dict(
                    t=t,
                    b=b,
                    greedy=int(greedy[b]),
                    greedy_noop=bool(noop[b, greedy[b]]),
                    gap=float(top2.values[b, 0] - top2.values[b, 1]),
                    p_greedy=float(probs[b, greedy[b]]),
                    p_noop=float(probs[b][noop[b]].sum()),
                    q_greedy=float(q[b, greedy[b]]),
                    q_best=float(q[b].max()),
                    q_argmax_noop=bool(noop[b, q[b].argmax()]),
                    argmax_agree=bool(q[b].argmax() == greedy[b]),
                )
            )
        td["action"] = greedy
        out = env.step(td)["next"]
        success |= ~ended & out["terminated"].squeeze(-1) & (out["reward"].squeeze(-1) > 0)
        ended |= out["done"].squeeze(-1)
        if ended.all():
            break
        td = out.exclude("reward", "done", "terminated", "truncated")
    n = len(rows)
    noop_rows = [r for r in rows if r["greedy_noop"]]
    summary = {
        "run_dir": run_dir,
        "env_steps": steps,
        "greedy_success": float(success.float().mean()),
        "steps": n,
        "greedy_noop_share": len(noop_rows) / n,
        "episodes_with_greedy_noop": len({r["b"] for r in noop_rows}) / B,
        "critic_argmax_noop_share": sum(r["q_argmax_noop"] for r in rows) / n,
        "actor_critic_argmax_agree": sum(r["argmax_agree"] for r in rows) / n,
        "mean_gap": sum(r["gap"] for r in rows) / n,
        "at_greedy_noops": {
            "p_greedy": sum(r["p_greedy"] for r in noop_rows) / max(1, len(noop_rows)),
            "q_greedy_minus_q_best": sum(r["q_greedy"] - r["q_best"] for r in noop_rows) / max(1, len(noop_rows)),
            "critic_prefers_noop": sum(r["q_argmax_noop"] for r in noop_rows) / max(1, len(noop_rows)),
        },
        "first_step_greedy_noop": sum(r["greedy_noop"] for r in rows if r["t"] == 0) / B,
    }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+")
    for run_dir in parser.parse_args().run_dirs:
        print(json.dumps(probe(run_dir)))


if __name__ == "__main__":
    main()
