"""Text of Playground-Text, rendered from the compact integer state (spec: "Observation").

Kept apart from the environment so that anything holding the compact state (a replay buffer, a
relabeled trajectory) renders the same prompts without re-running the environment::

    Goal: Grow green mouse then grow blue rose
    You see: green water, green mouse, blue rose, red rose, blue lion, red food
    You are on: nothing
    You are holding: nothing
    You have grown: nothing
    Action: <- a trailing space, no newline
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from torchrl_glam.envs.playground.catalogue import GoalCatalogue
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES

_GO_TO = tuple(f"Go to {name}" for name in OBJECT_NAMES)


def _listing(names: list[str]) -> str:
    return ", ".join(names) if names else "nothing"


def render_prompt(goal: str, scene: Sequence[str], agent_on: int, held: int, grown: Sequence[bool]) -> str:
    """The prompt of one state: ``scene`` is the object names in scene order, ``agent_on`` and
    ``held`` are scene slots (-1 for nothing), ``grown`` one flag per slot."""
    return (
        f"Goal: {goal}\n"
        f"You see: {_listing([n for i, n in enumerate(scene) if i != held])}\n"
        f"You are on: {scene[agent_on] if agent_on >= 0 else 'nothing'}\n"
        f"You are holding: {scene[held] if held >= 0 else 'nothing'}\n"
        f"You have grown: {_listing([n for n, g in zip(scene, grown) if g])}\n"
        "Action: "
    )


def render_actions(scene_ids: Sequence[int]) -> list[str]:
    """The N+2 candidate actions of a scene: "Go to <object>" in scene order, "Grasp", "Release"."""
    return [_GO_TO[i] for i in scene_ids] + ["Grasp", "Release"]


def render_batch(
    goal_id: np.ndarray,
    objects: np.ndarray,
    agent_on: np.ndarray,
    held: np.ndarray,
    grown: np.ndarray,
    catalogue: GoalCatalogue | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Prompts [B] and candidate actions [B][N+2] of a batch of compact states (numpy or torch).

    Examples:
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> from torchrl_glam.envs.playground.render import render_batch
        >>> td = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0, text=False).reset()
        >>> prompts, actions = render_batch(td["goal_id"], td["objects"], td["agent_on"], td["held"], td["grown"])
        >>> len(prompts), prompts[0].splitlines()[1]
        (2, 'You see: red cactus, blue lion, blue water')
        >>> actions[0]
        ['Go to red cactus', 'Go to blue lion', 'Go to blue water', 'Grasp', 'Release']
    """
    goals = (catalogue or GoalCatalogue.default()).goals
    goal_id, objects, agent_on, held, grown = (
        np.asarray(x).tolist() for x in (goal_id, objects, agent_on, held, grown)
    )
    prompts, actions = [], []
    for g, ids, on, h, gr in zip(goal_id, objects, agent_on, held, grown):
        prompts.append(render_prompt(goals[g], [OBJECT_NAMES[i] for i in ids], on, h, gr))
        actions.append(render_actions(ids))
    return prompts, actions
