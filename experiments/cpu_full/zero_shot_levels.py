# The pretrained model's zero-shot level on the comparison's own evaluation episodes: the cpu_full
# agent before any update, evaluated on every evaluation set of seeds 0-2.
#   python experiments/cpu_full/zero_shot_levels.py [MODEL]   (default: the preset's model)
import sys
from pathlib import Path

import torch

from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.training.evaluation import EVAL_SETS, evaluate
from torchrl_glam.training.factories import act, make_eval_envs

torch.set_num_threads(1)
print("seed,set,success")
for seed in (0, 1, 2):
    cfg = make_config(
        str(Path(__file__).resolve().parent / "presets" / "sac_glam" / "cpu_full.yaml"),
        {"seed": seed, **({"model": sys.argv[1]} if len(sys.argv) > 1 else {})},
    )
    agent = make_loss(cfg, num_actions=8)
    for name, env in make_eval_envs(cfg).items():
        result = evaluate(lambda td, greedy: act(agent, td, greedy), env, greedy=EVAL_SETS[name].greedy)
        print(f"{seed},{name},{result['success']:.4f}", flush=True)
