"""The chosen environment's options in a config (``env.options``): each value typed by the
environment's declaration (:class:`~torchrl_glam.envs.options.EnvOption`) and checked against its
bounds, an option it does not declare refused, each in one line naming the environment; the short
names of a command line (``history=2`` for ``env.options.history=2``); and the options of configs
that 0.3.0 wrote, which listed every environment's."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import make_dataclass
from typing import TYPE_CHECKING, Any

from torchrl_glam.training.config.sections import DEFAULT_ENVIRONMENT, ConfigError
from torchrl_glam.training.config.values import abbreviated, from_text, has_type, integral, type_name

if TYPE_CHECKING:
    from torchrl_glam.envs import EnvOption, TextEnvironment

OPTIONS_PATH = "env.options"
#: the start of an option's path (``env.options.history``)
OPTIONS_PREFIX = OPTIONS_PATH + "."

#: 0.3.0's ``EnvOptions``: every environment's options with their defaults, written into every
#: config.json; an option the saved run's environment does not declare is dropped when it holds
#: that default (0.3.0 refused any other value for it)
OPTIONS_0_3_DEFAULTS: dict[str, Any] = {
    "num_objects": None,
    "goal_types": None,
    "history": 0,
    "wording": None,
    "level_time_limits": False,
}


def registered_environment(name: str) -> TextEnvironment:
    """The registered environment ``name`` (without its options); an unknown one, or one whose
    package is missing, as a :class:`ConfigError` naming ``env.name``."""
    from torchrl_glam.envs import get_environment

    try:
        return get_environment(name)
    except ImportError as error:  # an optional dependency: the environment's error names its extra
        needed = "" if "pip install" in str(error) else " (a package the environment needs is not installed)"
        raise ConfigError(f"bad config value env.name={name!r}: {error}{needed}") from None
    except ValueError as error:
        raise ConfigError(f"bad config value env.name={name!r}: {error}") from None


def option_names(environment: TextEnvironment) -> str:
    """The environment's options, listed for a refusal."""
    return ", ".join(option.name for option in environment.options) or "none"


def typed_options(environment: TextEnvironment, given: Mapping[str, Any], defaults: bool = True) -> dict[str, Any]:
    """Every option of ``environment`` (``defaults=False``: those ``given``): ``given``'s values
    (text is read as on a command line) typed and checked by their declarations, the others at
    their defaults. Raises a
    :class:`ConfigError` naming the option and the environment for an option it does not declare,
    a value of the wrong type or one out of bounds."""
    declared = {option.name: option for option in environment.options}
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, list(declared), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown option {OPTIONS_PATH}.{name}: env={environment.name!r} has no option {name!r} "
                f"(its options: {option_names(environment)}){hint}"
            )
    values = {}
    for name, option in declared.items():
        if name not in given:
            if defaults:
                values[name] = option.default
            continue
        value = _typed(option, given[name])
        problem = option.problem(value)
        if problem is not None:
            raise ConfigError(
                f"bad config value {OPTIONS_PATH}.{name}={abbreviated(value)}: expected {problem} "
                f"(an option of env={environment.name!r})"
            )
        values[name] = value
    return values


def _typed(option: EnvOption, value: Any) -> Any:
    """``value`` as the option's type: text converted as on a command line, other values checked."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path, expected = f"{OPTIONS_PATH}.{option.name}", type_name(option.type)
    value = integral(value, option.type)
    if isinstance(value, str):
        value = from_text(value, option.type)
    if not isinstance(value, str) and not has_type(value, option.type):
        got = type(value).__name__
        raise ConfigError(f"bad config value {path}={abbreviated(value)}: expected {expected}, got {got}")
    try:  # OmegaConf reads text as the config's fields are read ("2", "true")
        typed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(_holder(option.type)), {"value": value}))
    except OmegaConfBaseException:
        raise ConfigError(f"bad config value {path}={abbreviated(value)}: expected {expected}") from None
    return typed.value


@functools.cache
def _holder(hint: Any) -> type:
    """A structured config of one field of type ``hint``, for OmegaConf to type a value with."""
    return make_dataclass("EnvOptionValue", [("value", hint)])


def declared_only(flat: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config's values by path (``flatten_sections`` of its config.json) without the options
    its environment does not declare that hold 0.3.0's defaults: 0.3.0 wrote every environment's
    options, and refused any other value for one its environment lacked (an unknown environment:
    as saved, refused by validation)."""
    try:
        environment = registered_environment(flat.get("env.name", DEFAULT_ENVIRONMENT))
    except ConfigError:
        return dict(flat)
    declared = {option.name for option in environment.options}

    def kept(path: str, value: Any) -> bool:
        name = path.removeprefix(OPTIONS_PREFIX)
        return (
            not path.startswith(OPTIONS_PREFIX)
            or name in declared
            or name not in OPTIONS_0_3_DEFAULTS
            or value != OPTIONS_0_3_DEFAULTS[name]
        )

    return {path: value for path, value in flat.items() if kept(path, value)}
