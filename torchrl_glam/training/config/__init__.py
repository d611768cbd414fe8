"""What the configs of every GLAM algorithm share, one concern a module: the sections (``env``
with its ``options``, ``model``, ``run``; :mod:`~torchrl_glam.training.config.sections`), the table
of rules that validates them, each check beside its words (:mod:`~torchrl_glam.training.config.rules`),
:class:`GLAMConfig` (:mod:`~torchrl_glam.training.config.base`), typed ``key=value`` overrides
(:mod:`~torchrl_glam.training.config.overrides`), presets as YAML files
(:mod:`~torchrl_glam.training.config.presets`) and each field's help line, from its metadata
(:mod:`~torchrl_glam.training.config.helptext`). Each algorithm adds its own sections
(``algorithm``, SAC-GLAM's ``replay``) and rules in its folder:
``torchrl_glam/algorithms/<algorithm>/config.py`` and ``presets/``.

A field is named by its path (``hindsight.her``) or, where no other field has its name, by its name
alone (``her``); ``env=babyai`` and ``model=none`` name their section's ``name``.
"""

from torchrl_glam.training.config.base import GLAMConfig
from torchrl_glam.training.config.helptext import field_help
from torchrl_glam.training.config.overrides import (
    MAX_LIST_ENTRIES,
    config_paths,
    flatten_sections,
    parse_overrides,
    typed_overrides,
)
from torchrl_glam.training.config.presets import (
    Preset,
    Presets,
    config_from_preset,
    preset_name,
    preset_overrides,
)
from torchrl_glam.training.config.rules import DEVICE_NAME, RULES, Rule, lacks
from torchrl_glam.training.config.sections import (
    DEFAULT_ENVIRONMENT,
    MAX_EPISODE_STEPS,
    MAX_SEED,
    MAX_THREADS,
    MAX_TOTAL_STEPS,
    NAMED_SECTIONS,
    ConfigError,
    EnvConfig,
    ModelConfig,
    RunConfig,
    setting,
)

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "DEVICE_NAME",
    "MAX_EPISODE_STEPS",
    "MAX_LIST_ENTRIES",
    "MAX_SEED",
    "MAX_THREADS",
    "MAX_TOTAL_STEPS",
    "NAMED_SECTIONS",
    "RULES",
    "ConfigError",
    "EnvConfig",
    "GLAMConfig",
    "ModelConfig",
    "Preset",
    "Presets",
    "Rule",
    "RunConfig",
    "config_from_preset",
    "config_paths",
    "field_help",
    "flatten_sections",
    "lacks",
    "parse_overrides",
    "preset_name",
    "preset_overrides",
    "setting",
    "typed_overrides",
]
