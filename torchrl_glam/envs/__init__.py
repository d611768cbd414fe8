"""Playground-Text: the goal grammar, the rules and social partner, text rendering (also as the
``RenderText`` transform), the EnvBase."""
from torchrl_glam.envs.catalogue import GOAL_TYPES, GoalCatalogue, descriptions_of_object
from torchrl_glam.envs.playground import GOAL_SETS, PlaygroundTextEnv, max_reports_per_step
from torchrl_glam.envs.render import render_actions, render_batch, render_prompt
from torchrl_glam.envs.transforms import STATE_KEYS, PartialResetActionMask, RenderText
from torchrl_glam.envs.rules import PlaygroundRules, action_mask_from_held, feeds, object_ids
from torchrl_glam.envs.vocabulary import OBJECT_NAMES, OBJECT_TYPES, vocabulary_words

__all__ = [
    "GOAL_SETS",
    "GOAL_TYPES",
    "GoalCatalogue",
    "OBJECT_NAMES",
    "OBJECT_TYPES",
    "PartialResetActionMask",
    "PlaygroundRules",
    "PlaygroundTextEnv",
    "RenderText",
    "STATE_KEYS",
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
