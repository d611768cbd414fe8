"""How much of a padded prompt batch is padding, on the ``cpu`` preset's model and task sets
(session 24): an upper bound on what removing the prompts' padding could save.

Random play (uniform over each state's candidates) in 128 environments for 30 steps gives the
prompts; each is tokenised by the preset's scorer's tokenizer. Batches of 128 prompts are then
drawn from them at random (as an update samples its replay) and padded to their longest prompt, as
the scorer pads. Prints the prompts' token lengths and the mean share of real tokens in a batch.

    python experiments/loop_speed/prompt_padding.py
"""

import numpy as np
import torch

from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
from torchrl_glam.envs.playground import STATE_KEYS
from torchrl_glam.envs.playground.render import render_batch
from torchrl_glam.training.factories import make_env, make_scorer_from_config

BATCH, ENVS, STEPS, DRAWS = 128, 128, 30, 200


def prompt_lengths(goals: str) -> np.ndarray:
    cfg = SACGLAMConfig(**{**PRESETS["cpu"], "goals": goals})
    env, tokenizer = make_env(cfg, num_envs=ENVS), make_scorer_from_config(cfg).tokenizer
    generator = torch.Generator().manual_seed(0)
    td, lengths = env.reset(), []
    for _ in range(STEPS):
        prompts, _ = render_batch(*(td[key] for key in STATE_KEYS))
        lengths += [len(ids) for ids in tokenizer(prompts).input_ids]
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        td = env.step(td)["next"]
    return np.array(lengths)


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"{BATCH} prompts per batch, {DRAWS} batches drawn from {ENVS} x {STEPS} random-play prompts")
    for goals in ("simplified", "train"):
        lengths = prompt_lengths(goals)
        batches = rng.choice(lengths, (DRAWS, BATCH))
        real = (batches.sum(1) / (BATCH * batches.max(1))).mean()
        print(
            f"goals={goals:<10} prompt tokens: mean {lengths.mean():.1f}, min {lengths.min()}, "
            f"max {lengths.max()}; real tokens in a padded batch: {real:.1%} (padding {1 - real:.1%})"
        )


if __name__ == "__main__":
    main()
