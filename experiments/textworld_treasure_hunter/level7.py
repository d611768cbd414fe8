"""Runs an example script with TextWorld's treasure hunter at level 7 registered as
``textworld_treasure_hunter_7``: five rooms as at level 4, but quests of four actions (walk up to
three rooms, then take), so that a uniform choice among the admissible commands wins about a
sixth of the games rather than a third. Registered from Python as the library's docs show
(``register_environment``, ``register_recipe``), not shipped as a package environment::

    python -m experiments.textworld_treasure_hunter.level7 examples/sac_glam.py \
        --preset cpu_textworld_coin_collector env=textworld_treasure_hunter_7 room_take_goals=true seed=0
    python -m experiments.textworld_treasure_hunter.level7 -m torchrl_glam.training.zero_shot \
        --model random --env textworld_treasure_hunter_7 --goals train held_out --max-steps 20 --episodes 256
"""

from __future__ import annotations

import runpy
import sys

from torchrl_glam.envs import register_environment
from torchrl_glam.envs.textworld import TextWorldText
from torchrl_glam.envs.textworld.environment import TRANSCRIPT_RECIPE
from torchrl_glam.offline.recipes import TranscriptRecipe, register_recipe

NAME = "textworld_treasure_hunter_7"


def register() -> None:
    """Registers the level-7 treasure hunter and its offline models' recipe under :data:`NAME`."""
    register_environment(NAME, lambda: TextWorldText("treasure_hunter", {"level": 7}, name=NAME), replace=True)
    register_recipe(NAME, TranscriptRecipe(**TRANSCRIPT_RECIPE))


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    register()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
