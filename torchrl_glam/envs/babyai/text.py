r"""BabyAI-Text's text layer: the goal grammar, the description of the egocentric view, prompts.

Everything here is a function of the compact state of :class:`~torchrl_glam.envs.babyai.torchrl_env.BabyAITextEnv`
("goal_id", "image": minigrid's 7x7x3 encoded view, "carrying": [type, color] indices or -1), so a
replay buffer can store integers and re-render any prompt
(:class:`~torchrl_glam.envs.babyai.transforms.RenderBabyAIText`), as
Playground-Text does with :class:`~torchrl_glam.envs.playground.transforms.RenderText`.

Two wordings (:data:`WORDINGS`). ``"glam"``, the default, is GLAM's text exactly (Carta et al.
2023, flowersteam/Grounding_LLMs_with_online_RL: the description of its bundled minigrid, the
prompt of its agents), quirks included, so that what a model learns or scores here compares with
GLAM's curves and with BALROG's zero-shot numbers (which use GLAM's descriptions)::

    Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle \n Goal of
    the agent: go to the red ball \n Observation 0: You see a wall 2 steps forward, You see a red ball
    1 step left and 2 steps forward, \n Action 0: <- a trailing space

(one string, wrapped here: \n is a line break, " \n " joins its parts). GLAM's quirks, kept: each
line from the agent (forward, left, right) skips unseen and empty cells and ends at the first
other cell, and says "a wall" only when that cell is a wall (no wall behind a ball, key, box or
door); an open door reads "a open blue door" (GLAM's branch for "an" never runs); each
observation ends with ", " (an empty one is nothing at all); past observations are numbered from
0, oldest first, within the window the prompt shows, each followed by the action taken after it
(GLAM shows two; ``history``).

``"readable"`` is this project's former wording (before GLAM's was the default): "Possible
actions", plain line breaks, unnumbered observations, "an open door", "You see nothing" for an
empty view, and the nearest wall of each line even behind objects::

    Possible actions of the agent: turn left, turn right, go forward, pick up, drop, toggle
    Goal of the agent: go to the red ball
    Observation: You see a wall 3 steps forward
    Action: turn left
    Observation: You see a wall 2 steps forward, You see a red ball 1 step left and 2 steps forward
    Action: <- the current observation's
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

try:
    from minigrid.core.constants import COLOR_NAMES, IDX_TO_COLOR, IDX_TO_OBJECT, OBJECT_TO_IDX
except ImportError as error:  # the registry imports this module when a config names env=babyai
    raise ImportError(f"BabyAI-Text needs minigrid ({error}): pip install 'torchrl_glam[babyai]'") from None

from torchrl_glam.envs.protocol import GoalIndex

if TYPE_CHECKING:  # torch loads where a tensor is made (a config is checked before it loads)
    import torch

#: The texts a prompt can be rendered in: GLAM's exactly (the default) and this project's former one.
WORDINGS = ("glam", "readable")
#: The six candidate actions, in minigrid's action order (turn left = 0 ... toggle = 5).
ACTIONS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
#: Types an instruction can name (minigrid.envs.babyai.core.verifier.OBJ_TYPES) and the movable ones.
OBJ_TYPES = ("box", "ball", "key", "door")
MOVABLE_TYPES = ("box", "ball", "key")
#: Color-type pairs that MixedTrainLocal never names and MixedTestLocal always names (GLAM's split).
HELD_OUT_PAIRS = frozenset({("yellow", "box"), ("red", "key"), ("red", "door"), ("green", "ball"), ("grey", "door")})
#: The compact state, in :func:`render_batch`'s order; "goal_id" is constant within an episode.
STATE_KEYS = ("goal_id", "image", "carrying")
STEP_STATE_KEYS = ("image", "carrying")
#: The compact state of the past observations shown in the prompt (an environment with a history):
#: [history] views, what was carried in them, and the action taken after each (-1: none yet), oldest first.
HISTORY_KEYS = ("past_images", "past_carrying", "past_actions")
#: The longest history of past observations a prompt shows (each adds ~60 tokens to a prompt of ~95).
MAX_HISTORY = 8
VIEW_SIZE = 7
_AGENT = (VIEW_SIZE // 2, VIEW_SIZE - 1)  # the agent's cell in the egocentric view, facing "up"
_WALL, _DOOR = OBJECT_TO_IDX["wall"], OBJECT_TO_IDX["door"]
_NOT_OBJECTS = {OBJECT_TO_IDX[n] for n in ("unseen", "empty", "wall", "floor", "agent")}
# GLAM describes every cell but unseen, empty and wall ones (BabyAI's views hold no floor or agent)
_NOT_OBJECTS_GLAM = {OBJECT_TO_IDX[n] for n in ("unseen", "empty", "wall")}
_SEE_THROUGH = {OBJECT_TO_IDX["unseen"], OBJECT_TO_IDX["empty"]}  # cells a GLAM line passes over
#: the straight lines from the agent, the nearest cell first
_LINES = (
    ("forward", [(_AGENT[0], y) for y in range(_AGENT[1] - 1, -1, -1)]),
    ("left", [(x, _AGENT[1]) for x in range(_AGENT[0] - 1, -1, -1)]),
    ("right", [(x, _AGENT[1]) for x in range(_AGENT[0] + 1, VIEW_SIZE)]),
)
_DOOR_STATES = ("open", "closed", "locked")  # minigrid's STATE_TO_IDX order


def describe_object(type_: str, color: str | None, article: str) -> str:
    """The surface of minigrid's ``ObjDesc``: "the red ball" (one match), "a ball" (several)."""
    return f"{article} {color} {type_}" if color else f"{article} {type_}"


#: Goal types, for evaluation groups and curricula (the Mixed levels' task kinds; both surfaces of
#: the sequence are one type).
GOAL_TYPES = ("goto", "pickup", "open", "putnext", "pickup_then_goto")


class BabyAIGoalCatalogue(GoalIndex):
    """Every instruction of the Mixed levels' grammar, with a fixed id each (7,168 goals).

    An object description is ``<the|a> [color] <box|ball|key|door>`` (minigrid's ``ObjDesc`` without
    locations). The instructions: "go to D", "pick up M", "open R", "put M next to D",
    "pick up M, then go to D" and "go to D after you pick up M", where M is a movable object and R a
    door, surfaced exactly as minigrid's ``Instr.surface``. Mirrors Playground-Text's
    :class:`~torchrl_glam.envs.playground.catalogue.GoalCatalogue`: ``goals``, ``goal_to_id``, ``goal_type`` (an index
    into :data:`GOAL_TYPES`), ``parts`` (a sequence's "pick up" and "go to" ids, -1 elsewhere).
    """

    _instance: BabyAIGoalCatalogue | None = None

    def __init__(self) -> None:
        colors = (None, *COLOR_NAMES)
        descs = [(t, c, a) for t in OBJ_TYPES for c in colors for a in ("the", "a")]
        movable = [d for d in descs if d[0] in MOVABLE_TYPES]
        doors = [d for d in descs if d[0] == "door"]
        s = {d: describe_object(*d) for d in descs}
        # (goal, type, the descriptions it names): the names decide the train/test split
        rows = [(f"go to {s[d]}", 0, (d,)) for d in descs] + [(f"pick up {s[m]}", 1, (m,)) for m in movable]
        rows += [(f"open {s[r]}", 2, (r,)) for r in doors]
        rows += [(f"put {s[m]} next to {s[d]}", 3, (m, d)) for m in movable for d in descs]
        rows += [(f"pick up {s[m]}, then go to {s[d]}", 4, (m, d)) for m in movable for d in descs]
        rows += [(f"go to {s[d]} after you pick up {s[m]}", 4, (m, d)) for m in movable for d in descs]
        self.goals: list[str] = [g for g, _, _ in rows]
        self.goal_to_id: dict[str, int] = {g: i for i, g in enumerate(self.goals)}
        self.goal_type = np.array([k for _, k, _ in rows], dtype=np.int64)
        self.parts = np.full((len(rows), 2), -1, dtype=np.int64)
        for i, (_goal, kind, named) in enumerate(rows):
            if kind == 4:
                self.parts[i] = (self.goal_to_id[f"pick up {s[named[0]]}"], self.goal_to_id[f"go to {s[named[1]]}"])
        self._pairs = [[(c, t) for t, c, _ in named] for _, _, named in rows]
        # the descriptions each goal names, as indices into ``descriptions`` (-1 pads singles)
        self.descriptions: list[tuple] = descs
        index = {d: i for i, d in enumerate(descs)}
        self.named = np.array([[index[d] for d in named] + [-1] * (2 - len(named)) for _, _, named in rows])

    @classmethod
    def default(cls) -> BabyAIGoalCatalogue:
        """A shared instance."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def unknown_goal(self, goal: str) -> str:
        return (
            f"{goal!r} is not an instruction of the BabyAI-Text grammar (go to / pick up / open / "
            "put ... next to / pick up ..., then go to ... / go to ... after you pick up ...)"
        )

    def type_of(self, goal: int | str) -> str:
        """The type of a goal, one of :data:`GOAL_TYPES`."""
        return GOAL_TYPES[self.goal_type[self.id_of(goal) if isinstance(goal, str) else goal]]

    def goals_in_scene(self, objects: np.ndarray) -> np.ndarray:
        """bool [G]: the goals whose surfaces fit a scene, ``objects`` [N, 2] its (type, color)
        indices (-1 rows ignored, e.g. the env's "objects"): every description matches an object,
        with "the" for exactly one match and "a" for several (as ``ObjDesc.surface`` reads them)."""
        objects = [tuple(o) for o in np.asarray(objects).tolist() if o[0] >= 0]
        names = [(IDX_TO_OBJECT[t], IDX_TO_COLOR[c]) for t, c in objects]
        fits = np.array(
            [
                (n := sum(t == typ and (c is None or c == col) for typ, col in names)) > 0
                and (n == 1) == (article == "the")
                for t, c, article in self.descriptions
            ]
            + [True]  # index -1: no second description
        )
        return fits[self.named].all(axis=1)

    def goal_set(self, name: str) -> np.ndarray:
        """Ids of "all", "train" (names no held-out color-type pair) or "test" (names only held-out
        pairs): the supersets of what MixedTrainLocal / MixedTestLocal ask."""
        if name == "all":
            return np.arange(len(self.goals))
        if name == "train":
            keep = [not any(p in HELD_OUT_PAIRS for p in pairs) for pairs in self._pairs]
        elif name == "test":
            keep = [all(p in HELD_OUT_PAIRS for p in pairs) for pairs in self._pairs]
        else:
            raise ValueError(f"goal set {name!r}: choose 'all', 'train' or 'test'")
        return np.flatnonzero(keep)


_PICKABLE = [OBJECT_TO_IDX[t] for t in MOVABLE_TYPES]
_TOGGLEABLE = [OBJECT_TO_IDX[t] for t in ("door", "box")]


def action_mask_from_state(image: torch.Tensor, carrying: torch.Tensor, mask_noops: bool = True) -> torch.Tensor:
    """bool [..., 6]: the legal actions of compact states (the rule the environment applies).

    All six are legal unless ``mask_noops``: then "pick up" needs a movable object in front and
    empty hands, "drop" something carried and an empty cell in front, "toggle" a door or a box in
    front: exactly minigrid's conditions for those actions to change anything. The cell in front
    is the view's (3, 5), always visible.
    """
    import torch

    mask = torch.ones(*carrying.shape[:-1], len(ACTIONS), dtype=torch.bool, device=carrying.device)
    if mask_noops:
        front = image[..., _AGENT[0], _AGENT[1] - 1, 0].long()
        empty_hands = carrying[..., 0] < 0
        pickable, toggleable = (torch.tensor(kinds, device=front.device) for kinds in (_PICKABLE, _TOGGLEABLE))
        mask[..., ACTIONS.index("pick up")] = empty_hands & torch.isin(front, pickable)
        mask[..., ACTIONS.index("drop")] = ~empty_hands & (front == OBJECT_TO_IDX["empty"])
        mask[..., ACTIONS.index("toggle")] = torch.isin(front, toggleable)
    return mask


def _steps(n: int, side: str) -> str:
    return f"{n} step {side}" if n == 1 else f"{n} steps {side}"


def _offset(dx: int, dy: int) -> str:
    """ "1 step left and 2 steps forward" for dx columns right of the agent, dy rows ahead."""
    parts = []
    if dx:
        parts.append(_steps(abs(dx), "right" if dx > 0 else "left"))
    if dy:
        parts.append(_steps(dy, "forward"))
    return " and ".join(parts)


def check_wording(wording: str) -> str:
    """``wording`` if it is one of :data:`WORDINGS`, else a one-line ``ValueError``."""
    if wording not in WORDINGS:
        raise ValueError(
            f"wording={wording!r}: choose 'glam' (GLAM's text exactly, the default) or 'readable' "
            "(this project's former wording)"
        )
    return wording


def _line_end(view: list, cells: list[tuple[int, int]], wording: str) -> int | None:
    """Steps to the wall a line of ``cells`` reports, or None. GLAM's line ends at its first cell
    that is neither unseen nor empty (a wall behind an object is not reported); the readable one
    reports the first wall, behind objects too."""
    for n, (x, y) in enumerate(cells, start=1):
        kind = view[x][y][0]
        if kind == _WALL:
            return n
        if wording == "glam" and kind not in _SEE_THROUGH:
            return None
    return None


def describe_view(image: np.ndarray, carrying: Sequence[int], wording: str = "glam") -> list[str]:
    """The sentences for one egocentric view in ``wording`` (see the module docstring): ``image``
    is minigrid's encoded 7x7x3 view (``image[x, y]``, the agent at (3, 6) facing up; unseen cells
    are 0) and ``carrying`` the [type, color] indices of the carried object, or [-1, -1]."""
    check_wording(wording)
    view = np.asarray(image).tolist()  # Python ints: indexing numpy scalars cell by cell is slower
    ax, ay = _AGENT
    sentences = []
    if carrying[0] >= 0:
        sentences.append(f"You carry a {IDX_TO_COLOR[int(carrying[1])]} {IDX_TO_OBJECT[int(carrying[0])]}")
    for side, cells in _LINES:
        n = _line_end(view, cells, wording)
        if n is not None:
            sentences.append(f"You see a wall {_steps(n, side)}")
    not_objects = _NOT_OBJECTS if wording == "readable" else _NOT_OBJECTS_GLAM
    for x, column in enumerate(view):
        for y, (kind, color_index, state_index) in enumerate(column):
            if kind in not_objects or (x, y) == _AGENT:
                continue
            color = IDX_TO_COLOR[color_index]
            if kind == _DOOR:
                state = _DOOR_STATES[state_index]
                article = "an" if state == "open" and wording == "readable" else "a"  # GLAM: "a open"
                what = f"{article} {state} {color} door"
            else:
                what = f"a {color} {IDX_TO_OBJECT[kind]}"
            sentences.append(f"You see {what} {_offset(x - ax, ay - y)}")
    return sentences


@lru_cache(maxsize=2)
def _actions_line(wording: str) -> str:
    return ("Possible action of the agent: " if wording == "glam" else "Possible actions of the agent: ") + ", ".join(
        ACTIONS
    )


def _readable_observation(image: np.ndarray, carrying: Sequence[int]) -> str:
    seen = describe_view(image, carrying, "readable")
    return f"Observation: {', '.join(seen) if seen else 'You see nothing'}\n"


def render_prompt(
    goal: str,
    image: np.ndarray,
    carrying: Sequence[int],
    past: Sequence[tuple[np.ndarray, Sequence[int], int]] = (),
    wording: str = "glam",
) -> str:
    """The prompt of one state in ``wording``: ``past`` holds the earlier (view, carried, action
    taken) shown before the current observation, oldest first (empty: no history)."""
    if wording == "glam":
        # GLAM's layout: " \n " between parts, observations numbered in the window, each sentence
        # followed by ", ", the last "Action i: " left open
        views = [(im, c) for im, c, _ in past] + [(image, carrying)]
        text = f"{_actions_line(wording)} \n Goal of the agent: {goal}"
        for i, (im, c) in enumerate(views):
            seen = "".join(f"{sentence}, " for sentence in describe_view(im, c, wording))
            text += f" \n Observation {i}: {seen}\n Action {i}: "
            if i < len(past):
                text += ACTIONS[int(past[i][2])]
        return text
    check_wording(wording)
    history = "".join(f"{_readable_observation(im, c)}Action: {ACTIONS[int(a)]}\n" for im, c, a in past)
    current = _readable_observation(image, carrying)
    return f"{_actions_line(wording)}\nGoal of the agent: {goal}\n{history}{current}Action: "


def render_batch(
    goal_id: np.ndarray,
    image: np.ndarray,
    carrying: np.ndarray,
    catalogue: BabyAIGoalCatalogue | None = None,
    past_images: np.ndarray | None = None,
    past_carrying: np.ndarray | None = None,
    past_actions: np.ndarray | None = None,
    wording: str = "glam",
) -> tuple[list[str], list[list[str]]]:
    """Prompts [B] and candidate actions [B][6] of a batch of compact states (numpy or torch) in
    ``wording``; the ``past_*`` arrays (:data:`HISTORY_KEYS`, [B, history, ...]) add the past
    observations whose action is set (>= 0).

    Examples:
        >>> from torchrl_glam.envs.babyai import BabyAITextEnv
        >>> from torchrl_glam.envs.babyai.text import render_batch
        >>> td = BabyAITextEnv(num_envs=2, seed=0, text=False).reset()  # tensors only
        >>> prompts, actions = render_batch(td["goal_id"], td["image"], td["carrying"])
        >>> len(prompts), prompts[0].splitlines()[1].strip()
        (2, 'Goal of the agent: pick up the grey ball, then go to a grey key')
        >>> actions[0]
        ['turn left', 'turn right', 'go forward', 'pick up', 'drop', 'toggle']
    """
    check_wording(wording)
    goals = (catalogue or BabyAIGoalCatalogue.default()).goals
    goal_id, image, carrying = (np.asarray(x) for x in (goal_id, image, carrying))
    if past_actions is None:
        pasts = [()] * len(goal_id)
    else:
        past_images, past_carrying, past_actions = (np.asarray(x) for x in (past_images, past_carrying, past_actions))
        pasts = [
            [(im[j], c[j], a[j]) for j in np.flatnonzero(a >= 0)]
            for im, c, a in zip(past_images, past_carrying, past_actions)
        ]
    prompts = [
        render_prompt(goals[int(g)], im, c, past, wording) for g, im, c, past in zip(goal_id, image, carrying, pasts)
    ]
    return prompts, [list(ACTIONS) for _ in prompts]


def vocabulary_words() -> list[str]:
    """Every word of a prompt, a goal or an action (punctuation apart, as a word-level tokenizer
    splits "Action:"), for building the tiny models' tokenizers as for Playground-Text."""
    words = "Possible action actions of the agent Goal Observation Action You see carry a an the wall nothing and"
    words += " step steps left right forward 0 1 2 3 4 5 6 7 8 go to pick up put next then after you open"
    words += " turn drop toggle " + " ".join(_DOOR_STATES + tuple(COLOR_NAMES) + OBJ_TYPES)
    return list(dict.fromkeys(words.split() + [":", ","]))


__all__ = [
    "ACTIONS",
    "BabyAIGoalCatalogue",
    "GOAL_TYPES",
    "HELD_OUT_PAIRS",
    "HISTORY_KEYS",
    "MAX_HISTORY",
    "MOVABLE_TYPES",
    "OBJ_TYPES",
    "STATE_KEYS",
    "STEP_STATE_KEYS",
    "WORDINGS",
    "action_mask_from_state",
    "check_wording",
    "describe_object",
    "describe_view",
    "render_batch",
    "render_prompt",
    "vocabulary_words",
]
