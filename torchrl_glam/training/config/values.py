"""Config values as a command line and YAML give them: text read as the field's type (``none``,
comma-separated lists, YAML's ``[a, b]``, exactly integral numbers), a value checked against a
type hint, and the words of a refusal (a type's name, a value abbreviated). Shared by the fields
(:mod:`~torchrl_glam.training.config.overrides`) and the environments' options
(:mod:`~torchrl_glam.training.config.options`)."""

from __future__ import annotations

from typing import Any, Union, get_args, get_origin

import yaml


def abbreviated(value: Any, limit: int = 200) -> str:
    """``repr(value)``, abbreviated past ``limit`` characters (an error echoes a value, not megabytes)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    entries = f", {len(value)} entries" if isinstance(value, (list, tuple, dict, set)) else ""
    return f"{text[: limit - 50]}... ({len(text)} characters{entries})"


def integral(value: Any, hint: Any) -> Any:
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


def has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the field type ``hint`` (bool is no int here; an int is a float)."""
    if type(None) in get_args(hint) or get_origin(hint) is Union:
        return any(has_type(value, option) for option in get_args(hint))
    if get_origin(hint) is list:
        (item,) = get_args(hint) or (Any,)
        return isinstance(value, list) and all(has_type(v, item) for v in value)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def from_text(text: str, hint: Any) -> Any:
    optional = type(None) in get_args(hint)
    if optional and text.strip().lower() in ("none", "null", "~"):
        return None
    kind = next((arg for arg in get_args(hint) if arg is not type(None)), hint) if optional else hint
    if get_origin(kind) is list:
        if text.strip().startswith("["):
            return yaml.safe_load(text)
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def type_name(hint: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text", type(None): "none"}
    if get_origin(hint) is Union or type(None) in get_args(hint):
        return " or ".join(type_name(option) for option in get_args(hint))
    if get_origin(hint) is list:
        return f"a list of {type_name(get_args(hint)[0])}"
    return names.get(hint, str(hint))
