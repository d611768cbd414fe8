"""BabyAI-Text (GLAM's benchmark) on minigrid's BabyAI levels (``pip install torchrl_glam[babyai]``):
the batched ``EnvBase`` (:class:`BabyAITextEnv`) with its social partner, the text of its compact
state (:mod:`~torchrl_glam.envs.babyai.text`), and :class:`BabyAIText`, the protocol's registered
``"babyai"``."""

import lazy_loader

# each name loads its module on first use: the text layer and BabyAIText import without torch (a
# config is checked against BabyAIText's metadata); the EnvBase and transform load TorchRL
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "torchrl_env": ["LEVELS", "MIXED_KINDS", "BabyAITextEnv", "SocialPartner", "make_level"],
        "environment": ["BabyAIText"],
        "text": ["ACTIONS", "BabyAIGoalCatalogue", "MAX_HISTORY", "render_batch", "vocabulary_words"],
        "transforms": ["RenderBabyAIText"],
    },
)
