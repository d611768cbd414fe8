"""How a collapse unfolds, checkpoint by checkpoint: on the first states of the "train" evaluation
episodes (nothing underfoot, nothing held: "Grasp" and "Release" change nothing there), the
actor's scores of the actions that change nothing against the best other action, the critic's
Q-values of the same, and greedy success.

    python -m experiments.collapse.trace CONFIG_JSON CHECKPOINT [CHECKPOINT ...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from experiments.collapse.probe import probe, scores_and_q, train_episodes
from torchrl_glam.algorithms.sac_glam.build import load_trained_loss


@torch.no_grad()
def trace(run_dir: str) -> dict:
    trained = cfg, loss, steps = load_trained_loss(run_dir)
    _, td = train_episodes(cfg)
    state = td.select(*cfg.environment.state_keys, "action_mask")
    noop = cfg.environment.noop_actions(state)
    scores, q = scores_and_q(loss, state)
    best_other = scores.masked_fill(noop, -torch.inf).max(-1).values
    best_noop = scores.masked_fill(~noop, -torch.inf).max(-1).values
    q_other = q.masked_fill(noop, -torch.inf).max(-1).values
    q_noop = q.masked_fill(~noop, -torch.inf).max(-1).values
    grasp = scores.shape[-1] - 2  # Playground-Text: "Go to" each object, then "Grasp", "Release"
    return {
        "env_steps": steps,
        "score_grasp": float(scores[:, grasp].mean()),
        "score_noop_minus_other": float((best_noop - best_other).mean()),
        "p_noop": float(scores.softmax(-1)[noop].sum() / len(noop)),
        "q_noop_minus_other": float((q_noop - q_other).mean()),
        "greedy_success": probe(run_dir, trained)["greedy_success"],
    }


def main(argv: list[str]) -> None:
    config, *checkpoints = argv
    for checkpoint in checkpoints:
        with tempfile.TemporaryDirectory() as run_dir:
            (Path(run_dir) / "checkpoint.pt").symlink_to(Path(checkpoint).resolve())
            (Path(run_dir) / "config.json").write_text(Path(config).read_text())
            print(json.dumps(trace(run_dir)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
