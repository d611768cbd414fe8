"""TextWorld's text games as a TorchRL environment (the ``[textworld]`` extra): pools of games
generated offline by TextWorld's own generators, goals from the games' logic, batched play."""

from torchrl_glam.envs.textworld.environment import TextWorldText
from torchrl_glam.envs.textworld.games import FAMILIES, GameBuildError, GameFileError, GamePool

__all__ = ["FAMILIES", "GameBuildError", "GameFileError", "GamePool", "TextWorldText"]
