"""Text environments as the library reads them: the :class:`TextEnvironment` protocol, its keys,
the registry of environment names, and the transforms every environment shares.

The environments are subpackages: :mod:`torchrl_glam.envs.playground` (Playground-Text) and
:mod:`torchrl_glam.envs.babyai` (BabyAI-Text, needs ``minigrid``). A config chooses one by name:
``get_environment("babyai")``; a user's own is registered with :func:`register_environment`.
"""

from torchrl_glam.envs.env_state import PlainEnvState
from torchrl_glam.envs.keys import (
    ACHIEVED_GOAL_COUNT_KEY,
    ACHIEVED_GOAL_IDS_KEY,
    ACTION_MASK_KEY,
    ACTIONS_KEY,
    GOAL_ID_KEY,
    PROMPT_KEY,
)
from torchrl_glam.envs.protocol import GoalCatalogueLike, MissingCapability, TextEnvironment
from torchrl_glam.envs.registry import (
    DEFAULT_ENVIRONMENT,
    environment_names,
    get_environment,
    register_environment,
    unregister_environment,
)
from torchrl_glam.envs.transforms import PartialResetActionMask, RenderState

__all__ = [
    "ACHIEVED_GOAL_COUNT_KEY",
    "ACHIEVED_GOAL_IDS_KEY",
    "ACTIONS_KEY",
    "ACTION_MASK_KEY",
    "DEFAULT_ENVIRONMENT",
    "GOAL_ID_KEY",
    "GoalCatalogueLike",
    "MissingCapability",
    "PROMPT_KEY",
    "PartialResetActionMask",
    "PlainEnvState",
    "RenderState",
    "TextEnvironment",
    "environment_names",
    "get_environment",
    "register_environment",
    "unregister_environment",
]
