"""What each environment's offline tiny models are pretrained on, and how they are named: the
offline room's own concept, so that the environment protocol says nothing of offline models.

An environment's package declares its recipe as it declares the environment, through an entry
point of the group :data:`ENTRY_POINT_GROUP` (under the environment's name, its value the
``module:attribute`` of a mapping of :class:`TranscriptRecipe`'s fields), or a script registers one
(:func:`register_recipe`) before the model is built::

    # pyproject.toml of the package that holds my_package/environment.py
    [project.entry-points."torchrl_glam.transcript_recipes"]
    my_env = "my_package.environment:TRANSCRIPT_RECIPE"   # {"max_steps": 20}

An environment that declares none gets the default :class:`TranscriptRecipe`: random-play
transcripts of its first goal set, 10 steps an episode, models named
``tiny-t5-pretrained-<name>``. This module imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from torchrl_glam.envs.registry import BUILT_IN_RECIPES, environment_or_default
from torchrl_glam.envs.registry import RECIPE_GROUP as ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment


def _no_text(environment: Any) -> str:
    return ""


@dataclass(frozen=True)
class TranscriptRecipe:
    """How the offline tiny models of one environment are made.

    Args:
        goal_sets (tuple[str, ...]): the goal sets the random-play transcripts share equally
            (``()``: the environment's first goal set).
        max_steps (int): the transcripts' episode length.
        hindsight (bool): whether ``offline:tiny-<kind>-hindsight`` (transcripts half of them with
            hindsight goals) is offered for it.
        unsuffixed (bool): its models keep the names and recipes of before they were per
            environment (no ``-<name>`` suffix, no environment in the recipe, no ``--env`` in the
            build command): the default environment's, whose shipped weights are named so.
        text (Callable[[TextEnvironment], str]): the name of the text an instance renders its
            prompts in, part of the pretraining recipe so that a model pretrained on another text
            is never reused (BabyAI-Text: its wording; TextWorld: its game pool). ``""``: the
            environment's only text.
    """

    goal_sets: tuple[str, ...] = ()
    max_steps: int = 10
    hindsight: bool = False
    unsuffixed: bool = False
    text: Callable[[Any], str] = _no_text

    def transcript_goal_sets(self, environment: TextEnvironment) -> tuple[str, ...]:
        """The goal sets of ``environment``'s transcripts."""
        return self.goal_sets or environment.goal_sets[:1]


#: the recipes registered from Python or already read from the entry points, by environment name
_RECIPES: dict[str, TranscriptRecipe] = {}


def register_recipe(name: str, recipe: TranscriptRecipe) -> None:
    """Makes ``recipe`` the offline models' recipe of the environment registered as ``name``.

    Examples:
        >>> from torchrl_glam.offline.recipes import TranscriptRecipe, recipe_of, register_recipe
        >>> register_recipe("my_walk", TranscriptRecipe(max_steps=30))
        >>> recipe_of("my_walk").max_steps
        30
    """
    if not isinstance(recipe, TranscriptRecipe):
        raise TypeError(f"recipe: expected a TranscriptRecipe, got {type(recipe).__name__}")
    _RECIPES[name] = recipe


def recipe_of(environment: TextEnvironment | str) -> TranscriptRecipe:
    """The recipe of an environment (or of its registry name): registered, declared by its package
    (read once), else the default."""
    name = environment if isinstance(environment, str) else environment.name
    if name not in _RECIPES:
        declared = {entry.value: entry for entry in entry_points(group=ENTRY_POINT_GROUP) if entry.name == name}
        if not declared and name in BUILT_IN_RECIPES:  # installed metadata that predates the recipes
            declared = {BUILT_IN_RECIPES[name]: EntryPoint(name, BUILT_IN_RECIPES[name], ENTRY_POINT_GROUP)}
        if len(declared) > 1:
            raise ValueError(
                f"the offline recipe of env={name!r} is declared by several entry points of the group "
                f"{ENTRY_POINT_GROUP!r} ({sorted(declared)}): uninstall all but one package"
            )
        _RECIPES[name] = _loaded(*declared.values()) if declared else TranscriptRecipe()
    return _RECIPES[name]


def _loaded(entry: Any) -> TranscriptRecipe:
    """The recipe an entry point declares: a mapping of :class:`TranscriptRecipe`'s fields."""
    where = f"the offline recipe of env={entry.name!r} (entry point {entry.value!r}, group {ENTRY_POINT_GROUP!r})"
    try:
        values = entry.load()
    except Exception as error:  # the package's own code: any error, reported in one line
        raise ValueError(f"{where} cannot be loaded: {type(error).__name__}: {error}") from None
    known = {f.name for f in fields(TranscriptRecipe)}
    if not isinstance(values, Mapping) or set(values) - known:
        raise ValueError(f"{where}: expected a mapping of the fields {sorted(known)}, got {values!r}")
    return TranscriptRecipe(**{k: tuple(v) if k == "goal_sets" else v for k, v in values.items()})


def vocabulary_environment(environment: TextEnvironment | None) -> TextEnvironment:
    """The environment whose words an offline model holds: ``environment`` itself, or, for
    ``None``, the default environment's (the paper's, whose models' names have no suffix)."""
    return environment_or_default(environment)


__all__ = [
    "ENTRY_POINT_GROUP",
    "TranscriptRecipe",
    "recipe_of",
    "register_recipe",
    "vocabulary_environment",
]
