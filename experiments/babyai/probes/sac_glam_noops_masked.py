"""Probe: SAC-GLAM on BabyAI-Text with the no-op actions masked (pick up, drop and toggle where
minigrid would do nothing: ``BabyAIText(mask_noops=True)``). No config field sets it, so this
registers it as its own environment, ``babyai_noops_masked``, and runs the library's SAC-GLAM
script with the arguments given (``env=babyai_noops_masked`` and an explicit ``model``: the
shipped BabyAI-Text tiny model is found by path, as a renamed environment has no shipped model of
its own):

    python experiments/babyai/probes/sac_glam_noops_masked.py --preset cpu_babyai --run-dir RUN_DIR \
        env=babyai_noops_masked model=torchrl_glam/offline/weights/tiny-t5-pretrained-babyai seed=0 ...

``--random-level goto pickup`` prints instead the uniformly random policy's success (over the
actions left unmasked) on the ``cpu_babyai`` evaluation sets of those goal types; ``--zero-shot
ARGS`` runs ``python -m torchrl_glam.training.zero_shot ARGS`` with the environment registered.
"""

import sys

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.algorithms.sac_glam.train import cli
from torchrl_glam.envs import get_environment, register_environment
from torchrl_glam.envs.babyai.environment import BabyAIText
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import make_eval_envs
from torchrl_glam.training.zero_shot import RANDOM, ZeroShotPolicy
from torchrl_glam.training.zero_shot import main as zero_shot


def register() -> None:
    """Registers ``babyai_noops_masked`` (again, if it is)."""
    register_environment("babyai_noops_masked", lambda: BabyAIText(mask_noops=True), replace=True)


def random_level(goal_types: list[str]) -> None:
    cfg = make_config(
        "cpu_babyai",
        {
            "env": "babyai_noops_masked",
            "goal_types": goal_types,
            "model": "torchrl_glam/offline/weights/tiny-t5-pretrained-babyai",
        },
    )
    # uniform over the actions left unmasked (the environment's action mask honours mask_noops); one
    # generator for all sets, so the sampled sets' repeats draw other actions
    policy = ZeroShotPolicy(None, mode=RANDOM, environment=get_environment("babyai_noops_masked"))
    for name, env in make_eval_envs(cfg).items():
        print(name, round(evaluate(policy, env, goal_types=cfg.environment.goal_types)["success"], 3))


if __name__ == "__main__":
    register()
    if sys.argv[1:2] == ["--random-level"]:
        random_level(sys.argv[2:])
    elif sys.argv[1:2] == ["--zero-shot"]:
        zero_shot(sys.argv[2:])
    else:
        sys.exit(cli())
