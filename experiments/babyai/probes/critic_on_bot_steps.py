"""Probe: does a trained SAC-GLAM run's critic (or its actor) rank the expert's action first?

The behaviour-cloning probe shows the model can imitate minigrid's BabyAI bot, while SAC-GLAM at
the same learning rate stays at random (experiments/babyai/README.md, session 35). This scores a
finished run's last checkpoint on the bot's steps (the same 2,000 episodes as the cloning probe, of
the run's own level and goal types): how often the critic's best action (the smaller head's
Q-values, masked) and the actor's (its scores) are the bot's, against always taking the bot's most
common action. Runs of ``sac_glam_noops_masked.py`` load too (its environment is registered here).

    python experiments/babyai/probes/critic_on_bot_steps.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from behaviour_cloning import bot_steps  # noqa: E402
from sac_glam_noops_masked import register  # noqa: E402

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.envs import ACTION_MASK_KEY  # noqa: E402
from torchrl_glam.envs.babyai.text import ACTIONS  # noqa: E402
from torchrl_glam.modules.scoring import SCORES_KEY  # noqa: E402


@torch.no_grad()
def main(run_dirs: list[str], episodes: int = 2000, chunk: int = 256) -> None:
    torch.set_num_threads(1)
    register()  # a run of sac_glam_noops_masked.py names its environment
    for run_dir in run_dirs:
        cfg, loss, steps = load_trained_loss(run_dir)
        loss.eval()
        states, actions, _ = bot_steps(cfg, episodes)
        best_q, best_actor = [], []
        for start in range(0, len(actions), chunk):
            batch = states[start : start + chunk]
            mask = batch[ACTION_MASK_KEY]
            best_q.append(loss.min_q_values(batch).masked_fill(~mask, float("-inf")).argmax(-1))
            best_actor.append(loss.score(batch)[SCORES_KEY].masked_fill(~mask, float("-inf")).argmax(-1))
        best_q, best_actor = torch.cat(best_q), torch.cat(best_actor)
        common = Counter(actions.tolist()).most_common(1)[0]
        print(
            f"{run_dir} at {steps} steps, {len(actions)} bot steps: the bot's action is the critic's best on "
            f"{(best_q == actions).float().mean():.3f}, the actor's best on {(best_actor == actions).float().mean():.3f}; "
            f"always '{ACTIONS[common[0]]}' matches {common[1] / len(actions):.3f}"
        )
        for name, best in (("critic", best_q), ("actor", best_actor)):
            shares = Counter(best.tolist())
            print(
                f"  {name}'s best actions: "
                + ", ".join(f"{ACTIONS[a]} {n / len(best):.2f}" for a, n in shares.most_common())
            )


if __name__ == "__main__":
    main(sys.argv[1:])
