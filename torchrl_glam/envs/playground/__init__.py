"""Playground-Text (the paper's environment, ../shared spec): the goal grammar, the rules and social
partner, the text rendering (also as the :class:`RenderText` transform), the batched ``EnvBase``
(:class:`PlaygroundTextEnv`) and :class:`PlaygroundText`, the protocol's registered ``"playground"``."""

from torchrl_glam.envs.playground.catalogue import GOAL_TYPES, GoalCatalogue, descriptions_of_object
from torchrl_glam.envs.playground.env import GOAL_SETS, PlaygroundTextEnv, max_reports_per_step
from torchrl_glam.envs.playground.environment import PlaygroundText
from torchrl_glam.envs.playground.render import render_actions, render_batch, render_prompt
from torchrl_glam.envs.playground.rules import PlaygroundRules, action_mask_from_held, feeds, object_ids
from torchrl_glam.envs.playground.transforms import STATE_KEYS, STEP_STATE_KEYS, RenderText
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES, OBJECT_TYPES, vocabulary_words

__all__ = [
    "GOAL_SETS",
    "GOAL_TYPES",
    "GoalCatalogue",
    "OBJECT_NAMES",
    "OBJECT_TYPES",
    "PlaygroundRules",
    "PlaygroundText",
    "PlaygroundTextEnv",
    "RenderText",
    "STATE_KEYS",
    "STEP_STATE_KEYS",
    "action_mask_from_held",
    "descriptions_of_object",
    "feeds",
    "max_reports_per_step",
    "object_ids",
    "render_actions",
    "render_batch",
    "render_prompt",
    "vocabulary_words",
]
