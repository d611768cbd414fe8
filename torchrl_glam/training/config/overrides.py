"""Values by field path, typed: a config's fields and short names, ``key=value`` overrides read as
on the command line (``none``, comma-separated lists, YAML's ``[a, b]``), checked for their type by
OmegaConf's structured configs, and the refusals that name the field, the value and its type."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar, get_type_hints

from torchrl_glam.training.compatibility import written_by
from torchrl_glam.training.config.options import (
    OPTIONS_PREFIX,
    declared_only,
    option_names,
    registered_environment,
    typed_options,
)
from torchrl_glam.training.config.sections import NAMED_SECTIONS, ConfigError
from torchrl_glam.training.config.values import abbreviated, from_text, has_type, integral, type_name

#: a config class (a :class:`~torchrl_glam.training.config.GLAMConfig`; not imported here, which
#: imports this module)
C = TypeVar("C")


@functools.cache
def _leaf_types(config_class: type, prefix: str = "") -> dict[str, Any]:
    hints = get_type_hints(config_class)
    out: dict[str, Any] = {}
    for f in fields(config_class):
        hint = hints[f.name]
        if is_dataclass(hint):
            out.update(_leaf_types(hint, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = hint
    return out


@functools.cache
def _short_names(config_class: type) -> dict[str, str]:
    paths = list(_leaf_types(config_class))
    leaves = [path.rsplit(".", 1)[-1] for path in paths]
    short = {leaf: path for leaf, path in zip(leaves, paths, strict=True) if leaves.count(leaf) == 1}
    short.update({section: f"{section}.name" for section in NAMED_SECTIONS if f"{section}.name" in paths})
    return short


def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"hindsight.her": True}`` -> ``{"hindsight": {"her": True}}``."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *sections, name = path.split(".")
        node = out
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = value
    return out


def _merged(config_class: type[C], base: C | type[C], values: Mapping[str, Any]) -> C:
    """``values`` (by path, as the user gave them) over ``base`` (a config or its class), typed by
    OmegaConf's structured configs: a value of the wrong type raises a :class:`ConfigError` naming it."""
    # imported here: --help and the refusals of unknown names answer without it
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(base), _nested(values)))
    except OmegaConfBaseException as error:
        raise _config_error(config_class, error, values) from None


def _config_error(config_class: type, error: Exception, given: Mapping[str, Any]) -> ConfigError:
    """OmegaConf's refusal as one line naming the field, the value and the type it needs."""
    path = str(getattr(error, "full_key", "") or "")
    message = str(getattr(error, "msg", error)).splitlines()[0]
    if path in _leaf_types(config_class):
        expected = type_name(_leaf_types(config_class)[path])
        if path in given:
            return ConfigError(f"bad config value {path}={abbreviated(given[path])}: expected {expected}")
        value = re.match(r"(?:Value|Incompatible value) '(.*?)'", message)
        if value:
            return ConfigError(f"bad config value {path}={abbreviated(value.group(1))}: expected {expected}")
        return ConfigError(f"bad config value {path}: {message}; expected {expected}")
    if path:
        return ConfigError(f"bad config field {path}: {message}")
    return ConfigError(f"bad config: {message}")


def typed_overrides(config_class: type, values: Mapping[str, Any], environment: str | None = None) -> dict[str, Any]:
    """Overrides (paths or short names -> values) -> ``{path: typed value}``.

    Text is read as on the command line: ``none``/``null`` for an optional field, comma-separated
    items for a list (``eval_sets=train,held_out``) or YAML's ``[a, b]``, the rest converted by
    OmegaConf to the field's type. Other values must have the field's type already (``true`` or
    ``8.5`` from a YAML file is no integer). A wrong type or an unknown name raises a
    :class:`ConfigError` naming it. The environment's options (``env.options.NAME``, or ``NAME``
    alone when ``environment``, the chosen environment's name, declares it and no field has that
    name) are kept as given: validation types them with the environment's declaration."""
    flat = _paths_and_values(config_class, values, environment)
    merged = _merged(config_class, config_class, flat)
    typed = {path: _value_at(merged, path) for path in flat}
    given = {
        path.removeprefix(OPTIONS_PREFIX): value for path, value in typed.items() if path.startswith(OPTIONS_PREFIX)
    }
    environment = typed.get("env.name", environment)
    if given and environment is not None:  # typed now where the environment is known
        try:
            declaration = registered_environment(environment)
        except ConfigError:  # an unknown environment: validation refuses its name
            return typed
        typed.update(
            {OPTIONS_PREFIX + name: value for name, value in typed_options(declaration, given, defaults=False).items()}
        )
    return typed


#: The most entries a list field takes (goal types, evaluation sets, loggers hold a few): a longer
#: list is refused before it is typed, which for a list of 10^5 entries took minutes.
MAX_LIST_ENTRIES = 1000


def _paths_and_values(config_class: type, values: Mapping[str, Any], environment: str | None = None) -> dict[str, Any]:
    """``values`` by path, text read as on the command line, other values checked for their type;
    the options of the environment named ``environment`` as given (see :func:`typed_overrides`)."""
    types = config_class.field_types()
    flat: dict[str, Any] = {}
    for name, value in flatten_sections(values).items():  # {"hindsight": {"her": true}} as hindsight.her
        if name.startswith(OPTIONS_PREFIX):  # typed by validation, which knows the environment
            flat[name] = value
            continue
        path = _option_or_path(config_class, name, environment)
        if path.startswith(OPTIONS_PREFIX):
            flat[path] = value
            continue
        value = integral(value, types[path])
        if isinstance(value, str):
            value = from_text(value, types[path])
        if isinstance(value, (list, tuple)) and len(value) > MAX_LIST_ENTRIES:
            raise ConfigError(
                f"bad config value {path}: a list of {len(value)} entries; expected {type_name(types[path])} "
                f"of at most {MAX_LIST_ENTRIES} entries"
            )
        if not isinstance(value, str) and not has_type(value, types[path]):
            raise ConfigError(
                f"bad config value {path}={abbreviated(value)}: expected {type_name(types[path])}, "
                f"got {type(value).__name__}"
            )
        flat[path] = value
    return flat


def environment_named(values: Mapping[str, Any]) -> str | None:
    """The environment's name that overrides (paths or short names -> values) set, if any."""
    named = flatten_sections(values)
    name = named.get("env.name", named.get("env"))
    return name if isinstance(name, str) else None


def _option_or_path(config_class: type, name: str, environment: str | None) -> str:
    """The path of a field's name, or of an option of ``environment`` named alone (``history``);
    an unknown name is refused by the config class, naming the environment's options too."""
    try:
        return config_class.path_of(name)
    except ConfigError as error:
        if environment is None or "." in name:
            raise
        try:  # the environment's declaration loads only for a name no field has
            declaration = registered_environment(environment)
        except ConfigError:  # an unknown environment: validation refuses its name
            raise error from None
        if any(option.name == name for option in declaration.options):
            return OPTIONS_PREFIX + name
        if not str(error).startswith("unknown config field"):
            raise
        close = str(error).partition("; did you mean ")[2]
        raise ConfigError(
            f"unknown config field {name!r}: not a field of {config_class.__name__}, nor an option of "
            f"env={environment!r} (its options: {option_names(declaration)}; --help lists both)"
            + (f"; did you mean {close}" if close else "")
        ) from None


def _value_at(config: Any, path: str) -> Any:
    for part in path.split("."):
        config = config[part] if isinstance(config, Mapping) else getattr(config, part)
    return config


def parse_overrides(pairs: Iterable[str], config_class: type, environment: str | None = None) -> dict[str, Any]:
    """``["batch_size=64", "hindsight.her=false", "model=none"]`` -> ``{path: typed value}``;
    ``environment``: the chosen environment's name, whose options may be named alone (``history=2``)."""
    values: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"override {pair!r} is not key=value (e.g. batch_size=64)")
        name, text = pair.split("=", 1)
        values[name] = text
    return typed_overrides(config_class, values, environment or environment_named(values))


def flatten_sections(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"hindsight": {"her": True}}`` -> ``{"hindsight.her": True}``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out.update(flatten_sections(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_paths(saved: Mapping[str, Any], config_class: type) -> dict[str, Any]:
    """A saved config (a run's config.json, ``to_dict()``) as ``{path: value}``. A name from before
    0.2.0 is refused with its new path; a config without sections (field names at the top, as
    torchrl_glam 0.2 wrote config.json) is refused naming the version."""
    former = [name for name in saved if name in config_class.FORMER_NAMES]
    if former:
        config_class.path_of(former[0])  # refused, naming the new path
    if saved and not any(isinstance(value, Mapping) for value in saved.values()):
        sections = ", ".join(f.name for f in fields(config_class))
        named = ", ".join(list(saved)[:3])
        raise ConfigError(
            f"a saved {config_class.__name__} holds its fields in sections ({sections}), not by name ({named}...): "
            + written_by("a config without sections", "config_without_sections_0_2")
        )
    return config_class.saved_values(declared_only(flatten_sections(saved)))  # and the algorithm's earlier versions
