"""Each config field's help line, from the field's metadata (:func:`~torchrl_glam.training.config.sections.setting`):
``--help`` lists it, with or without the package's source files."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, get_type_hints


def field_help(config_class: type) -> dict[str, str]:
    """Each field's help line, by path (``""`` for a field declared without one)."""
    return _section_help(config_class, "")


def _section_help(klass: Any, prefix: str) -> dict[str, str]:
    hints = get_type_hints(klass)
    out: dict[str, str] = {}
    for f in fields(klass):
        if is_dataclass(hints[f.name]):
            out.update(_section_help(hints[f.name], f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = f.metadata.get("help", "")
    return out
