"""TextWorld's text as the library keeps it: goals from the games' logic, the compact state's texts
as bytes, the prompts, and the vocabulary of TextWorld's own text grammars.

A goal is a fact over a predicate that play changes, in words: ``at(P, kitchen)`` is "go to the
kitchen", ``in(coin, I)`` "take the coin", ``open(box)`` "open the box", ``consumed(apple)`` "eat
the apple", ``sliced(carrot)`` "slice the carrot", ``roasted(carrot)`` "roast the carrot". A game's
own quest is the conjunction of its quests' winning facts ("take the coin" in coin collector).
Held-out games bring no unknown word: the vocabulary is every word of TextWorld's text grammars
and of the Inform7 rules its games are compiled with (both ship with the ``textworld`` package).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from torchrl_glam.envs.protocol import GoalIndex

if TYPE_CHECKING:
    import torch

    from torchrl_glam.envs.textworld.games import GamePool

#: goal types, indexed by the catalogue's ``goal_type``: the predicates play changes, and the goals of
#: several facts ("quest": the games' quests that are not one fact, and the room takes below)
GOAL_TYPES = ("go to", "take", "open", "eat", "cut", "cook", "quest")
#: (predicate, arity) -> (goal type, the goal's words; {0} is the fact's last argument)
FACT_GOALS: dict[tuple[str, int], tuple[str, str]] = {
    ("at", 2): ("go to", "go to the {0}"),  # only at(P, room): the player's place
    ("in", 2): ("take", "take the {0}"),  # only in(object, I): the inventory
    ("open", 1): ("open", "open the {0}"),
    ("consumed", 1): ("eat", "eat the {0}"),
    ("eaten", 1): ("eat", "eat the {0}"),
    **{
        (cut, 1): ("cut", f"{verb} the {{0}}")
        for cut, verb in (("sliced", "slice"), ("diced", "dice"), ("chopped", "chop"))
    },
    **{
        (way, 1): ("cook", f"{verb} the {{0}}")
        for way, verb in (("roasted", "roast"), ("fried", "fry"), ("grilled", "grill"))
    },
}
#: the most goals one step reports (a step changes a few facts)
MAX_REPORTS = 8
#: the text of a candidate slot no command fills (masked; scored like any text, so never empty)
PAD_COMMAND = "wait"
#: the history keys of the compact state (with the ``history`` option)
HISTORY_KEYS = ("past_observations", "past_actions")
MAX_HISTORY = 4


def fact_goal(name: str, arguments: Sequence[str]) -> str | None:
    """The goal a fact states (``name`` its predicate, ``arguments`` the entities' names), or
    ``None`` for a fact that is no goal (a map's layout, an object's place other than the player's
    inventory)."""
    found = FACT_GOALS.get((name, len(arguments)))
    if found is None:
        return None
    if name == "at" and arguments[0] != "P":
        return None
    if name == "in" and arguments[1] != "I":
        return None
    return found[1].format(arguments[0] if name == "in" else arguments[-1])


def goals_of_facts(facts: Iterable[Any]) -> set[str]:
    """The goals a game state's facts (TextWorld ``Proposition`` objects) hold."""
    out = set()
    for fact in facts:
        goal = fact_goal(fact.name, [argument.name for argument in fact.arguments])
        if goal is not None:
            out.add(goal)
    return out


def room_take_goal(room: str, thing: str) -> str:
    """ "go to the <room> and take the <thing>": the player in ``room`` holding ``thing``, in the
    words of a treasure hunter's quest (:func:`_quest_text` joins its two facts' goals)."""
    return f"{fact_goal('at', ['P', room])} and {fact_goal('in', [thing, 'I'])}"


def room_takes_of_facts(facts: Iterable[Any]) -> set[str]:
    """The room takes a game state's facts hold: the player's room with each object in its
    inventory."""
    rooms, things = [], []
    for fact in facts:
        arguments = [argument.name for argument in fact.arguments]
        if fact.name == "at" and arguments[0] == "P":
            rooms.append(arguments[1])
        elif fact.name == "in" and len(arguments) == 2 and arguments[1] == "I":
            things.append(arguments[0])
    return {room_take_goal(room, thing) for room in rooms for thing in things}


def clean(text: str) -> str:
    """TextWorld's output without the command prompt and status line it ends with (``>`` then the
    room and score), and with its runs of blank lines and spaces made single spaces."""
    text = re.split(r"\n>", text, maxsplit=1)[0]
    return " ".join(text.split())


# ---------------------------------------------------------------- the catalogue


#: The goal set of the training games whose episodes are given, half of them, a "go to the <room>"
#: goal of their game (a room the player does not start in) instead of its quest: the facts the
#: partner reports become tasks too, so hindsight relabels to goals training sets.
ROOMS_GOAL_SET = "train_and_rooms"
#: The share of a "train_and_rooms" episode's goals that are its game's quest.
QUEST_SHARE = 0.5


class TextWorldGoalCatalogue(GoalIndex):
    """Every goal of a pool's games, with a fixed id each: the facts each game's entities allow
    (its rooms to go to, its portable objects to take, its containers and doors to open, its food
    to eat, cut and cook), each game's quest where it is not one of them, and the room take of each
    portable object and the room it starts in ("go to the cellar and take the towel", a treasure
    hunter's quest form; reported by environments made with ``room_take_goals``). ``goal_set("train")``
    and ``goal_set("held_out")`` are the quests of the training and held-out games;
    ``goal_set("train_and_rooms")`` adds the training games' "go to the <room>" goals;
    ``quest_of[split][i]`` is game i's quest id and ``rooms_of[split][i]`` its room goals' ids."""

    def __init__(self, pool: GamePool) -> None:
        from textworld.generator import Game

        rows: dict[str, str] = {}  # goal -> type, in a fixed order
        takes: set[str] = set()
        quests: dict[str, list[str]] = {}
        rooms: dict[str, list[list[str]]] = {}
        for split in ("train", "held_out"):
            quests[split], rooms[split] = [], []
            for path in pool.games(split):
                game = Game.load(str(path.with_suffix(".json")))
                goals = sorted(_entity_goals(game))
                for goal, kind in goals:
                    rows.setdefault(goal, kind)
                takes.update(_room_takes(game))
                quests[split].append(_quest_text(game))
                rooms[split].append([goal for goal, kind in goals if kind == "go to"])
        for quest in (q for split in ("train", "held_out") for q in quests[split]):
            rows.setdefault(quest, "quest")
        ordered = sorted(rows, key=lambda g: (GOAL_TYPES.index(rows[g]), g))
        # room takes last, so that the other goals keep the ids earlier versions gave them (checkpoints, replay)
        other_takes = sorted(takes - rows.keys())
        ordered += other_takes
        rows.update(dict.fromkeys(other_takes, "quest"))
        self.goals: list[str] = ordered
        self.goal_to_id = {g: i for i, g in enumerate(ordered)}
        self.goal_type = np.array([GOAL_TYPES.index(rows[g]) for g in ordered], dtype=np.int64)
        self.parts = np.full((len(ordered), 2), -1, dtype=np.int64)
        self.quest_of = {split: [self.goal_to_id[q] for q in quests[split]] for split in quests}
        self.rooms_of = {split: [[self.goal_to_id[g] for g in game] for game in rooms[split]] for split in rooms}

    def unknown_goal(self, goal: str) -> str:
        return f"{goal!r} is no goal of this pool of TextWorld games"

    def goal_set(self, name: str) -> np.ndarray:
        if name == ROOMS_GOAL_SET:
            rooms = {g for game in self.rooms_of["train"] for g in game}
            return np.array(sorted(set(self.quest_of["train"]) | rooms), dtype=np.int64)
        if name not in self.quest_of:
            raise ValueError(f"unknown goal set {name!r}; choose 'train', 'held_out' or {ROOMS_GOAL_SET!r}")
        return np.array(sorted(set(self.quest_of[name])), dtype=np.int64)

    def reported(self, facts: Iterable[Any], room_takes: bool = False) -> set[int]:
        """The ids of the goals a game state's facts hold (with ``room_takes``, its room takes too)."""
        goals = goals_of_facts(facts) | (room_takes_of_facts(facts) if room_takes else set())
        return {self.goal_to_id[g] for g in goals if g in self}


def _entity_goals(game: Any) -> set[tuple[str, str]]:
    """(goal, type) of every fact goal a game's entities allow."""
    types = game.kb.types
    out = set()
    for info in game.infos.values():
        if info.name is None:
            continue
        if info.type == "r":
            out.add((f"go to the {info.name}", "go to"))
        if types.is_descendant_of(info.type, "o"):
            out.add((f"take the {info.name}", "take"))
        if types.is_descendant_of(info.type, ("c", "d")):
            out.add((f"open the {info.name}", "open"))
        if types.is_descendant_of(info.type, "f"):
            out.add((f"eat the {info.name}", "eat"))
    return out


def _room_takes(game: Any) -> set[str]:
    """The room take of each portable object of a game and the room it starts in (on or in
    something there, or on the floor)."""
    infos, types = game.infos, game.kb.types
    holder = {}  # entity -> what it is at, in or on
    for fact in game.world.facts:
        if fact.name in ("at", "in", "on") and len(fact.arguments) == 2:
            holder[fact.arguments[0].name] = fact.arguments[1].name
    out = set()
    for key, info in infos.items():
        if info.name is None or not types.is_descendant_of(info.type, "o"):
            continue
        place, seen = holder.get(key), set()
        while place in infos and infos[place].type != "r" and place not in seen:
            seen.add(place)
            place = holder.get(place)
        if place in infos and infos[place].type == "r" and infos[place].name:
            out.add(room_take_goal(infos[place].name, info.name))
    return out


def _quest_text(game: Any) -> str:
    """A game's quest in words: each quest's first winning condition's goal facts, joined by "and"."""
    names = {key: info.name for key, info in game.infos.items()}
    texts: list[str] = []
    for quest in game.quests:
        events = [e for e in quest.win_events if e.condition.preconditions]  # the cooking game's last quests have none
        for fact in events[0].condition.preconditions if events else ():
            goal = fact_goal(fact.name, [names.get(v.name) or v.name for v in fact.arguments])
            if goal is not None and goal not in texts:
                texts.append(goal)
    if not texts:
        raise ValueError("a TextWorld game whose quest names no fact this library reads as a goal")
    return " and ".join(texts)


# ---------------------------------------------------------------- texts as bytes


def encode(texts: Sequence[str], width: int) -> np.ndarray:
    """UTF-8 bytes [N, width], zero-padded; a longer text is cut at ``width`` bytes."""
    out = np.zeros((len(texts), width), dtype=np.uint8)
    for i, text in enumerate(texts):
        data = text.encode("utf-8")[:width]
        out[i, : len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out


def decode(data: Any) -> str:
    """The text of a zero-padded byte row (a tensor or an array)."""
    row = np.asarray(data, dtype=np.uint8)
    end = int(np.argmin(row)) if (row == 0).any() else len(row)
    return row[:end].tobytes().decode("utf-8", errors="ignore")


def render_batch(
    state: Mapping[str, torch.Tensor], goals: Sequence[str], history: int
) -> tuple[list[str], list[list[str]]]:
    """Prompts and candidates [B][A] of a flat batch of compact states, GLAM's layout: the possible
    actions, the goal, the past observations with the actions taken after them, the current
    observation and inventory, then ``"Action k: "`` for the candidate to continue. The slots no
    admissible command fills hold :data:`PAD_COMMAND` (the action mask masks them)."""
    prompts, candidates = [], []
    for b in range(len(state["goal_id"])):
        commands = [decode(row) for row in state["commands"][b]]
        admissible = [c for c in commands if c]
        lines = [
            f"Possible actions of the agent: {', '.join(admissible)}",
            f"Goal of the agent: {goals[int(state['goal_id'][b])]}",
        ]
        past = 0
        if history:
            for h in range(history):
                action = decode(state["past_actions"][b, h])
                if action:
                    lines += [
                        f"Observation {past}: {decode(state['past_observations'][b, h])}",
                        f"Action {past}: {action}",
                    ]
                    past += 1
        lines.append(f"Observation {past}: {decode(state['observation'][b])} {decode(state['inventory'][b])}")
        lines.append(f"Action {past}: ")
        prompts.append(" \n ".join(lines))
        candidates.append([c or PAD_COMMAND for c in commands])
    return prompts, candidates


# ---------------------------------------------------------------- vocabulary


def _textworld_data() -> tuple[list[Path], list[Path]]:
    """TextWorld's text grammars and the Inform7 rules its games are compiled with."""
    import textworld

    root = Path(textworld.__file__).parent
    grammars = sorted((root / "generator" / "data" / "text_grammars").glob("*.twg"))
    rules = sorted((root / "thirdparty").rglob("Graham Nelson/*Language.i7x")) + sorted(
        (root / "thirdparty").rglob("Graham Nelson/Standard Rules.i7x")
    )
    return grammars, rules + [root / "generator" / "inform7" / "world2inform7.py"]


@cache
def vocabulary_words() -> list[str]:
    """Every word (``\\w+`` run) of TextWorld's text grammars, its Inform7 rules and the Inform7
    writer's own sentences, in lower case, capitalised and upper case (TextWorld capitalises
    sentences and room headers), then ASCII punctuation and the numbers below 1000: the tokenizer splits every
    non-word character off, so each is a word."""
    grammars, rules = _textworld_data()
    words: set[str] = set()
    for path in (*grammars, *rules):
        for word in re.findall(r"[^\W\d_]+", path.read_text(encoding="utf-8", errors="ignore")):
            lower = word.lower()
            words.update((lower, lower.capitalize(), lower.upper()))
    words.update(("go", "to", "take", "open", "eat", "slice", "dice", "chop", "roast", "fry", "grill", "and"))
    words.update(("Possible", "actions", "of", "the", "agent", "Goal", "Observation", "Action"))
    return sorted(words) + list(string.punctuation) + [str(n) for n in range(1000)]


__all__ = [
    "FACT_GOALS",
    "GOAL_TYPES",
    "HISTORY_KEYS",
    "MAX_HISTORY",
    "MAX_REPORTS",
    "PAD_COMMAND",
    "TextWorldGoalCatalogue",
    "clean",
    "decode",
    "encode",
    "fact_goal",
    "goals_of_facts",
    "render_batch",
    "room_take_goal",
    "room_takes_of_facts",
    "vocabulary_words",
]
