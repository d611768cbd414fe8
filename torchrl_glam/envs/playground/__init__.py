"""Playground-Text (the paper's environment, ../shared spec): the goal grammar, the rules and social
partner, the text rendering (also as the :class:`RenderText` transform), the batched ``EnvBase``
(:class:`PlaygroundTextEnv`) and :class:`PlaygroundText`, the protocol's registered ``"playground"``."""

import lazy_loader

# each name loads its module on first use: the catalogue, rules and PlaygroundText import without
# torch (a config is checked against PlaygroundText's metadata); the EnvBase and transform load TorchRL
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "catalogue": ["GOAL_SETS", "GOAL_TYPES", "GoalCatalogue", "descriptions_of_object"],
        "torchrl_env": ["PlaygroundTextEnv", "max_reports_per_step"],
        "environment": ["PlaygroundText"],
        "render": ["render_actions", "render_batch", "render_prompt"],
        "rules": ["STATE_KEYS", "STEP_STATE_KEYS", "PlaygroundRules", "action_mask_from_held", "feeds", "object_ids"],
        "transforms": ["RenderText"],
        "vocabulary": ["OBJECT_NAMES", "OBJECT_TYPES", "vocabulary_words"],
    },
)
