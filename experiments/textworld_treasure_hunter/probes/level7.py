"""Probe: TextWorld's treasure hunter at level 7, registered as ``textworld_treasure_hunter_7``:
five rooms as at level 4, but quests of four actions (walk through up to three rooms, then take),
so that a uniform choice among the admissible commands wins about a sixth of the games rather than
a third. No config field sets a family's level, so this registers it as its own environment (with
the offline models' recipe of the other TextWorld families: its tiny T5 is pretrained on its own
training games, once) and runs the library's training script named first with the arguments given:
    python experiments/textworld_treasure_hunter/probes/level7.py sac_glam --preset cpu_textworld_coin_collector \
        env=textworld_treasure_hunter_7 room_take_goals=true seed=0 --run-dir RUN_DIR ...
``--zero-shot ARGS`` runs ``python -m torchrl_glam.training.zero_shot ARGS`` with the environment
registered (``--model random``: the random policy's level).
"""

import sys

from torchrl_glam.algorithms import get_script
from torchrl_glam.envs import register_environment
from torchrl_glam.envs.textworld import TextWorldText
from torchrl_glam.envs.textworld.environment import TRANSCRIPT_RECIPE
from torchrl_glam.offline.recipes import TranscriptRecipe, register_recipe
from torchrl_glam.training.zero_shot import main as zero_shot

NAME = "textworld_treasure_hunter_7"


def register() -> None:
    """Registers ``textworld_treasure_hunter_7`` and its offline models' recipe (again, if they are)."""
    register_environment(NAME, lambda: TextWorldText("treasure_hunter", {"level": 7}, name=NAME), replace=True)
    register_recipe(NAME, TranscriptRecipe(**TRANSCRIPT_RECIPE))


if __name__ == "__main__":
    register()
    if sys.argv[1:2] == ["--zero-shot"]:
        zero_shot(sys.argv[2:])
    else:
        sys.exit(get_script(sys.argv[1]).main(sys.argv[2:]))
