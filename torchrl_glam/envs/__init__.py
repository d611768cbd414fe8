"""Text environments: the protocol the library reads them through (:mod:`~torchrl_glam.envs.protocol`,
with the registry of environment names), and Playground-Text: the goal grammar, the rules and social
partner, text rendering (also as the ``RenderText`` transform), the EnvBase. BabyAI-Text (needs
``minigrid``) is imported from its own modules, or chosen by name: ``get_environment("babyai")``."""

from torchrl_glam.envs.catalogue import GOAL_TYPES, GoalCatalogue, descriptions_of_object
from torchrl_glam.envs.playground import GOAL_SETS, PlaygroundTextEnv, max_reports_per_step
from torchrl_glam.envs.playground_text import PlaygroundText
from torchrl_glam.envs.protocol import (
    MissingCapability,
    TextEnvironment,
    environment_names,
    get_environment,
    register_environment,
)
from torchrl_glam.envs.render import render_actions, render_batch, render_prompt
from torchrl_glam.envs.rules import PlaygroundRules, action_mask_from_held, feeds, object_ids
from torchrl_glam.envs.transforms import STATE_KEYS, PartialResetActionMask, RenderState, RenderText
from torchrl_glam.envs.vocabulary import OBJECT_NAMES, OBJECT_TYPES, vocabulary_words

__all__ = [
    "GOAL_SETS",
    "GOAL_TYPES",
    "GoalCatalogue",
    "OBJECT_NAMES",
    "OBJECT_TYPES",
    "MissingCapability",
    "PartialResetActionMask",
    "PlaygroundRules",
    "PlaygroundText",
    "PlaygroundTextEnv",
    "RenderState",
    "RenderText",
    "STATE_KEYS",
    "TextEnvironment",
    "action_mask_from_held",
    "descriptions_of_object",
    "environment_names",
    "feeds",
    "get_environment",
    "max_reports_per_step",
    "object_ids",
    "register_environment",
    "render_actions",
    "render_batch",
    "render_prompt",
    "vocabulary_words",
]
