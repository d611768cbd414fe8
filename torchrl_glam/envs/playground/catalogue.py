"""The goal grammar of Playground-Text: every goal, its type, its parts, and the train/test splits.

Terms (docs/site/playground_text_spec.md, "Goals"):

* a *description* names a set of objects: "red cat", "red animal", "any cat", "any red thing";
* a *single goal* is a verb and a description: "Grasp red cat", "Grow any animal" (246 of them);
* a *sequential goal* is "A then b": a Grow single goal A, then any single goal B with its first
  letter lower-cased (23,180 over the whole grammar).

``goal_id`` is the position of a goal in :attr:`GoalCatalogue.goals`: the 246 single goals first,
then the sequential goals ordered by (A, B). The order is fixed, so ids stored in a replay buffer
or a checkpoint stay valid.
"""

from __future__ import annotations

import difflib
from functools import cached_property

import numpy as np

from torchrl_glam.envs.playground.vocabulary import (
    CATEGORIES,
    COLOURS,
    GOAL_NOUNS,
    GROWABLE_NOUNS,
    OBJECT_NAMES,
    OBJECT_TYPES,
    PLANTS,
    category_of,
)
from torchrl_glam.envs.protocol import GoalIndex

GOAL_TYPES: tuple[str, ...] = ("grasp", "grow", "grow-then-grasp", "grow-then-grow")
GRASP, GROW, GROW_THEN_GRASP, GROW_THEN_GROW = range(4)
#: The named goal sets (:meth:`GoalCatalogue.goal_set`), the training set first.
GOAL_SETS = ("train", "simplified", "held_out")

#: Held-out descriptions that exclude every goal naming them (spec: "every goal naming ...").
_HELD_OUT_OBJECTS = ("red tree", "green dog", "blue door")
_HELD_OUT_NOUNS = ("flower",)


def _descriptions(nouns: tuple[str, ...]) -> list[str]:
    """Descriptions of a verb, in catalogue order: "<colour> <noun>", "any <colour> thing", "any <noun>"."""
    return (
        [f"{c} {n}" for c in COLOURS for n in nouns] + [f"any {c} thing" for c in COLOURS] + [f"any {n}" for n in nouns]
    )


def descriptions_of_object(name: str) -> list[str]:
    """The descriptions matching an object, e.g. "red cat" -> red cat, red animal, red living_thing,
    any cat, any animal, any living_thing, any red thing (spec: "Social partner and reward")."""
    colour, object_type = name.split(" ")
    nouns = [object_type, category_of(object_type)]
    if object_type in CATEGORIES["living_thing"]:
        nouns.append("living_thing")
    return [f"{colour} {n}" for n in nouns] + [f"any {n}" for n in nouns] + [f"any {colour} thing"]


def _is_held_out(verb: str, description: str) -> bool:
    words = description.split(" ")
    noun = words[-1] if words[0] != "any" or len(words) == 2 else None  # None for "any <c> thing"
    if description in _HELD_OUT_OBJECTS or noun in _HELD_OUT_NOUNS:
        return True
    if verb == "Grasp":
        return noun in ("animal", "fly")
    return noun in PLANTS or noun in ("plant", "living_thing")


class GoalCatalogue(GoalIndex):
    """Every goal of the Playground-Text grammar, in a stable order, with its type and splits.

    Build it once and share it: ``GoalCatalogue.default()`` returns a cached instance.

    Attributes:
        goals: the 23,426 goal texts; ``goal_id`` indexes this list.
        goal_type: int array [num_goals], an index into :data:`GOAL_TYPES`.
        parts: int array [num_goals, 2], the single-goal ids of the parts (-1 when absent).
        train_ids, simplified_ids, held_out_ids: int arrays of goal ids of the three goal sets.

    Examples:
        >>> from torchrl_glam.envs.playground import GOAL_TYPES, GoalCatalogue
        >>> catalogue = GoalCatalogue.default()
        >>> len(catalogue.goals), len(catalogue.train_ids), len(catalogue.simplified_ids), len(catalogue.held_out_ids)
        (23426, 8470, 182, 64)
        >>> catalogue.goals[0], GOAL_TYPES[catalogue.goal_type[0]]
        ('Grasp red door', 'grasp')
        >>> catalogue.goals[-1], GOAL_TYPES[catalogue.goal_type[-1]]
        ('Grow any living_thing then grow any plant', 'grow-then-grow')
    """

    _default: GoalCatalogue | None = None

    def __init__(self) -> None:
        self.descriptions: list[str] = _descriptions(GOAL_NOUNS)
        self._matching: dict[tuple[str, bool], list[str]] = {}
        description_id = {d: i for i, d in enumerate(self.descriptions)}
        grow_descriptions = _descriptions(GROWABLE_NOUNS)

        # single goals: (verb, description)
        singles = [("Grasp", d) for d in self.descriptions] + [("Grow", d) for d in grow_descriptions]
        self.num_single = len(singles)
        goals = [f"{verb} {d}" for verb, d in singles]
        single_is_grow = np.array([verb == "Grow" for verb, _ in singles])
        single_description = np.array([description_id[d] for _, d in singles])
        single_held_out = np.array([_is_held_out(verb, d) for verb, d in singles])

        # sequential goals "A then b" over every Grow A and every single B, skipping pairs that end
        # in the same two words ("Grow any cat then grasp any cat").
        self.sequential_id = np.full((self.num_single, self.num_single), -1, dtype=np.int64)
        parts = [(i, -1) for i in range(self.num_single)]
        for a in np.flatnonzero(single_is_grow):
            for b in range(self.num_single):
                if singles[a][1] == singles[b][1]:
                    continue
                self.sequential_id[a, b] = len(goals)
                goals.append(f"{goals[a]} then {goals[b][0].lower()}{goals[b][1:]}")
                parts.append((a, b))

        self.goals: list[str] = goals
        self.goal_to_id: dict[str, int] = {g: i for i, g in enumerate(goals)}
        self.parts = np.array(parts, dtype=np.int64)
        first, second = self.parts[:, 0], self.parts[:, 1]
        is_sequential = second >= 0
        self.goal_type = np.where(
            is_sequential,
            np.where(single_is_grow[second], GROW_THEN_GROW, GROW_THEN_GRASP),
            np.where(single_is_grow[first], GROW, GRASP),
        ).astype(np.int64)
        self.single_is_grow = single_is_grow
        self.single_description = single_description
        # objects a scene needs for each goal: one per part, plus a supply per Grow part
        per_part = np.where(self.parts >= 0, 1 + single_is_grow[np.maximum(self.parts, 0)], 0)
        self.required_objects = per_part.sum(axis=1)

        # the splits
        single_train = ~single_held_out
        self.held_out_ids = np.flatnonzero(~is_sequential & single_held_out[first])
        self.simplified_ids = np.flatnonzero(~is_sequential & single_train[first])
        seq_train = is_sequential & single_train[first] & single_train[np.maximum(second, 0)]
        self.train_ids = np.concatenate([self.simplified_ids, np.flatnonzero(seq_train)])

        # object name -> ids of the descriptions matching it, for the social partner
        self.object_descriptions = [
            np.array([description_id[d] for d in descriptions_of_object(n)]) for n in OBJECT_NAMES
        ]
        # description id -> its single-goal id for each verb (-1 when the verb cannot take it)
        self.grasp_goal_of = np.arange(len(self.descriptions))
        self.grow_goal_of = np.full(len(self.descriptions), -1, dtype=np.int64)
        for s in np.flatnonzero(single_is_grow):
            self.grow_goal_of[single_description[s]] = s

    @classmethod
    def default(cls) -> GoalCatalogue:
        """A shared instance (building one takes ~50 ms)."""
        if cls._default is None:
            cls._default = cls()
        return cls._default

    def goal_set(self, name: str) -> np.ndarray:
        """The goal ids of a named set: "train" (8,470), "simplified" (182) or "held_out" (64)."""
        sets = {"train": self.train_ids, "simplified": self.simplified_ids, "held_out": self.held_out_ids}
        if name not in sets:
            raise ValueError(f"unknown goal set {name!r}; choose one of {GOAL_SETS}")
        return sets[name]

    def unknown_goal(self, goal: str) -> str:
        """Names the nearest valid goals."""
        # a text without " then " is nearest to a single goal: search those 246 only (fast)
        close = nearest(goal, self.goals if " then " in goal else self.goals[: self.num_single])
        return f"unknown goal {goal!r}: not formed by the Playground-Text grammar. Nearest valid goals: {close}"

    def type_of(self, goal: int | str) -> str:
        """The type of a goal ("grasp", "grow", "grow-then-grasp" or "grow-then-grow")."""
        goal_id = self.id_of(goal) if isinstance(goal, str) else goal
        return GOAL_TYPES[self.goal_type[goal_id]]

    @cached_property
    def single_part_descriptions(self) -> list[tuple[str, str]]:
        """(verb, description) of every single goal, by single-goal id."""
        return [(g.split(" ", 1)[0], g.split(" ", 1)[1]) for g in self.goals[: self.num_single]]

    def matching_objects(self, description: str, growable_only: bool = False) -> list[str]:
        """Object names matching a description ("any red thing" -> every red object)."""
        key = (description, growable_only)
        if key not in self._matching:  # scene sampling asks at every reset: cache
            target = self.descriptions.index(description)
            names = [n for i, n in enumerate(OBJECT_NAMES) if target in self.object_descriptions[i]]
            if growable_only:
                names = [n for n in names if n.split(" ")[1] in CATEGORIES["living_thing"]]
            self._matching[key] = names
        return self._matching[key]


def nearest(value: str, valid: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The ``n`` valid values closest to ``value``, for error messages."""
    valid = list(valid)
    # a loose cutoff first: difflib's cheap upper bounds then skip most of 23k goals (~50x faster)
    return difflib.get_close_matches(value, valid, n=n, cutoff=0.6) or difflib.get_close_matches(
        value, valid, n=n, cutoff=0.0
    )


__all__ = [
    "GOAL_SETS",
    "GOAL_TYPES",
    "GoalCatalogue",
    "OBJECT_NAMES",
    "OBJECT_TYPES",
    "descriptions_of_object",
    "nearest",
]
