"""Values by field path, typed: a config's fields and short names, ``key=value`` overrides read as
on the command line (``none``, comma-separated lists, YAML's ``[a, b]``), checked for their type by
OmegaConf's structured configs, and the refusals that name the field, the value and its type."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from torchrl_glam.training.config.sections import NAMED_SECTIONS, ConfigError

if TYPE_CHECKING:
    from torchrl_glam.training.config.base import GLAMConfig

C = TypeVar("C", bound="GLAMConfig")


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
    """``{"replay.her": True}`` -> ``{"replay": {"her": True}}``."""
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
        expected = _type_name(_leaf_types(config_class)[path])
        if path in given:
            return ConfigError(f"bad config value {path}={_shown(given[path])}: expected {expected}")
        value = re.match(r"(?:Value|Incompatible value) '(.*?)'", message)
        if value:
            return ConfigError(f"bad config value {path}={_shown(value.group(1))}: expected {expected}")
        return ConfigError(f"bad config value {path}: {message}; expected {expected}")
    if path:
        return ConfigError(f"bad config field {path}: {message}")
    return ConfigError(f"bad config: {message}")


def typed_overrides(config_class: type[GLAMConfig], values: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides (paths or short names -> values) -> ``{path: typed value}``.

    Text is read as on the command line: ``none``/``null`` for an optional field, comma-separated
    items for a list (``eval_sets=train,held_out``) or YAML's ``[a, b]``, the rest converted by
    OmegaConf to the field's type. Other values must have the field's type already (``true`` or
    ``8.5`` from a YAML file is no integer). A wrong type or an unknown name raises a
    :class:`ConfigError` naming it."""
    flat = _paths_and_values(config_class, values)
    typed = _merged(config_class, config_class, flat)
    return {path: _value_at(typed, path) for path in flat}


#: The most entries a list field takes (goal types, evaluation sets, loggers hold a few): a longer
#: list is refused before it is typed, which for a list of 10^5 entries took minutes.
MAX_LIST_ENTRIES = 1000


def _shown(value: Any, limit: int = 200) -> str:
    """``repr(value)``, abbreviated past ``limit`` characters (an error echoes a value, not megabytes)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    entries = f", {len(value)} entries" if isinstance(value, (list, tuple, dict, set)) else ""
    return f"{text[: limit - 50]}... ({len(text)} characters{entries})"


def _paths_and_values(config_class: type[GLAMConfig], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` by path, text read as on the command line, other values checked for their type."""
    types = config_class.field_types()
    flat: dict[str, Any] = {}
    for name, value in flatten_sections(values).items():  # {"replay": {"her": true}} as replay.her
        path = config_class.path_of(name)
        value = _integral(value, types[path])
        if isinstance(value, str):
            value = _from_text(value, types[path])
        if isinstance(value, (list, tuple)) and len(value) > MAX_LIST_ENTRIES:
            raise ConfigError(
                f"bad config value {path}: a list of {len(value)} entries; expected {_type_name(types[path])} "
                f"of at most {MAX_LIST_ENTRIES} entries"
            )
        if not isinstance(value, str) and not _has_type(value, types[path]):
            raise ConfigError(
                f"bad config value {path}={_shown(value)}: expected {_type_name(types[path])}, "
                f"got {type(value).__name__}"
            )
        flat[path] = value
    return flat


def _integral(value: Any, hint: Any) -> Any:
    """An integer field's exactly integral number (``1e4``, ``64.0``, from the command line or YAML)
    as an int; anything else unchanged (``1.5`` is then refused with the field's type)."""
    if int not in (hint, *get_args(hint)) or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            int(text)
            return value  # already an integer's text ("10_000" too): OmegaConf reads it
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return value
        return int(number) if number.is_integer() else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the field type ``hint`` (bool is no int here; an int is a float)."""
    if type(None) in get_args(hint) or get_origin(hint) is Union:
        return any(_has_type(value, option) for option in get_args(hint))
    if get_origin(hint) is list:
        (item,) = get_args(hint) or (Any,)
        return isinstance(value, list) and all(_has_type(v, item) for v in value)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _value_at(config: Any, path: str) -> Any:
    for part in path.split("."):
        config = getattr(config, part)
    return config


def _from_text(text: str, hint: Any) -> Any:
    optional = type(None) in get_args(hint)
    if optional and text.strip().lower() in ("none", "null", "~"):
        return None
    kind = next((arg for arg in get_args(hint) if arg is not type(None)), hint) if optional else hint
    if get_origin(kind) is list:
        if text.strip().startswith("["):
            return yaml.safe_load(text)
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def parse_overrides(pairs: Iterable[str], config_class: type[GLAMConfig]) -> dict[str, Any]:
    """``["batch_size=64", "replay.her=false", "model=none"]`` -> ``{path: typed value}``."""
    values: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"override {pair!r} is not key=value (e.g. batch_size=64)")
        name, text = pair.split("=", 1)
        values[name] = text
    return typed_overrides(config_class, values)


def _type_name(hint: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text", type(None): "none"}
    if get_origin(hint) is Union or type(None) in get_args(hint):
        return " or ".join(_type_name(option) for option in get_args(hint))
    if get_origin(hint) is list:
        return f"a list of {_type_name(get_args(hint)[0])}"
    return names.get(hint, str(hint))


def flatten_sections(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"replay": {"her": True}}`` -> ``{"replay.her": True}``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out.update(flatten_sections(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_paths(saved: Mapping[str, Any], config_class: type[GLAMConfig]) -> dict[str, Any]:
    """A saved config (a run's config.json, ``to_dict()``) as ``{path: value}``. A name from before
    0.2.0 is refused with its new path; a config without sections (field names at the top, as
    torchrl_glam 0.2 wrote config.json) is refused naming the version."""
    former = [name for name in saved if name in config_class.FORMER_NAMES]
    if former:
        config_class.path_of(former[0])  # refused, naming the new path
    if saved and not any(isinstance(value, Mapping) for value in saved.values()):
        sections = ", ".join(f.name for f in fields(config_class))
        raise ConfigError(
            f"a saved {config_class.__name__} holds its fields in sections ({sections}), not by name "
            f"({', '.join(list(saved)[:3])}...): a config without sections was written by torchrl_glam 0.2, "
            "which this version does not read; start a new run with a fresh --run-dir, or read it with torchrl_glam 0.2"
        )
    return flatten_sections(saved)
