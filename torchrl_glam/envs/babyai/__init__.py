"""BabyAI-Text (GLAM's benchmark) on minigrid's BabyAI levels (``pip install torchrl_glam[babyai]``):
the batched ``EnvBase`` (:class:`BabyAITextEnv`) with its social partner, the text of its compact
state (:mod:`~torchrl_glam.envs.babyai.text`), and :class:`BabyAIText`, the protocol's registered
``"babyai"``."""

from torchrl_glam.envs.babyai.env import LEVELS, MIXED_KINDS, BabyAITextEnv, SocialPartner, make_level
from torchrl_glam.envs.babyai.environment import BabyAIText
from torchrl_glam.envs.babyai.text import ACTIONS, BabyAIGoalCatalogue, RenderBabyAIText, render_batch, vocabulary_words

__all__ = [
    "ACTIONS",
    "BabyAIGoalCatalogue",
    "BabyAIText",
    "BabyAITextEnv",
    "LEVELS",
    "MIXED_KINDS",
    "RenderBabyAIText",
    "SocialPartner",
    "make_level",
    "render_batch",
    "vocabulary_words",
]
