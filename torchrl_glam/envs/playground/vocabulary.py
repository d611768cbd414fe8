"""The words of Playground-Text (docs/site/playground_text_spec.md, "Vocabulary").

Everything here is plain data, in a fixed order: the goal catalogue, the object ids of a scene and
the offline tokenizer are all built from these tuples, so their order is part of the format of a
saved replay buffer. Append, never reorder.
"""

from __future__ import annotations

COLOURS: tuple[str, ...] = ("red", "blue", "green")

FURNITURE: tuple[str, ...] = (
    "door",
    "chair",
    "desk",
    "lamp",
    "table",
    "cupboard",
    "sink",
    "window",
    "sofa",
    "carpet",
)
PLANTS: tuple[str, ...] = (
    "cactus",
    "carnivorous",
    "flower",
    "tree",
    "bush",
    "grass",
    "algae",
    "tea",
    "rose",
    "bonsai",
)
ANIMALS: tuple[str, ...] = (
    "dog",
    "cat",
    "chameleon",
    "human",
    "fly",
    "parrot",
    "mouse",
    "lion",
    "pig",
    "cow",
)
SUPPLIES: tuple[str, ...] = ("food", "water")

# category noun -> the object types it names
CATEGORIES: dict[str, tuple[str, ...]] = {
    "animal": ANIMALS,
    "plant": PLANTS,
    "furniture": FURNITURE,
    "living_thing": ANIMALS + PLANTS,
    "supply": SUPPLIES,
}

#: The 32 object types, in catalogue order.
OBJECT_TYPES: tuple[str, ...] = FURNITURE + PLANTS + ANIMALS + SUPPLIES
#: The 37 goal nouns: object types then category nouns.
GOAL_NOUNS: tuple[str, ...] = OBJECT_TYPES + tuple(CATEGORIES)
#: The 23 nouns a Grow goal may name: animal and plant types, "animal", "plant", "living_thing".
GROWABLE_NOUNS: tuple[str, ...] = ANIMALS + PLANTS + ("animal", "plant", "living_thing")

#: Every object name a scene may hold, "<colour> <type>": 3 x 32 = 96, colour-major.
OBJECT_NAMES: tuple[str, ...] = tuple(f"{c} {t}" for c in COLOURS for t in OBJECT_TYPES)

#: Words of the prompt template and of the action texts (punctuation is separate: a word-level
#: tokenizer splits "see:" into "see" and ":").
TEMPLATE_WORDS: tuple[str, ...] = (
    "Goal",
    "You",
    "see",
    "are",
    "on",
    "holding",
    "have",
    "grown",
    "Action",
    "nothing",
    "Go",
    "to",
    "Grasp",
    "Release",
    "Grow",
    "grasp",
    "grow",
    "then",
    "any",
    "thing",
)
PUNCTUATION: tuple[str, ...] = (":", ",")


def category_of(object_type: str) -> str:
    """The category ("animal", "plant", "furniture" or "supply") of an object type."""
    for name in ("animal", "plant", "furniture", "supply"):
        if object_type in CATEGORIES[name]:
            return name
    raise ValueError(f"unknown object type {object_type!r}; known types: {', '.join(OBJECT_TYPES)}")


def vocabulary_words() -> list[str]:
    """Every word that can appear in a prompt or an action, for building word-level tokenizers."""
    words = list(TEMPLATE_WORDS) + list(PUNCTUATION) + list(COLOURS) + list(GOAL_NOUNS)
    return list(dict.fromkeys(words))  # ordered and unique
