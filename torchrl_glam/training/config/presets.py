"""Presets: YAML files of values by section, an algorithm's in ``presets/`` beside its config, a
study's anywhere (``--preset FILE``), each opening with its purpose; ``extends:`` merges one over
another, named (a shipped preset) or by its file's path from the extending file's folder."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from torchrl_glam.training.config.overrides import flatten_sections
from torchrl_glam.training.config.sections import ConfigError

if TYPE_CHECKING:
    from torchrl_glam.training.config.base import GLAMConfig

C = TypeVar("C", bound="GLAMConfig")


@dataclass(frozen=True)
class Preset:
    """A preset file: its name, one-line purpose (the file's first comment) and values."""

    name: str
    purpose: str
    values: dict[str, Any]
    path: Path


class Presets(Mapping[str, dict[str, Any]]):
    """The presets of one algorithm: ``presets/<name>.yaml`` files beside its config, read on first
    use. ``presets[name]`` is the preset's values as nested sections (``extends: <name>`` resolved:
    a preset's values are merged over the one it extends); :meth:`purpose` its one line.

    Files are read with ``yaml.safe_load``: a preset can hold values only, never code."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    @functools.cached_property
    def _files(self) -> dict[str, tuple[Path, str, dict[str, Any]]]:
        """name -> (file, purpose, values as written)."""
        return {path.stem: (path, *_read_preset(path)) for path in sorted(self.folder.glob("*.yaml"))}

    @functools.cached_property
    def _presets(self) -> dict[str, Preset]:
        return {
            name: Preset(name, purpose, self.resolve(values, path, (name,)), path)
            for name, (path, purpose, values) in self._files.items()
        }

    def resolve(self, values: Mapping[str, Any], where: Path, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        """``values`` (a preset file's, read at ``where``) merged over the preset its ``extends:``
        names, itself resolved: one of these presets by name, or a ``.yaml`` file by its path from
        ``where``'s folder (a study's presets extend each other so, wherever the study is);
        ``seen``: the presets and files on the way, which it may not extend again."""
        values = dict(values)
        base = values.pop("extends", None)
        if base is None:
            return values
        if not isinstance(base, str):
            raise ConfigError(
                f"preset file {where}: extends {base!r}, but a preset extends one preset, by name "
                f"(e.g. 'extends: cpu') or by a .yaml file's path; choose one of {sorted(self._files)}"
            )
        if base.endswith((".yaml", ".yml")):
            path = (where.parent / base).resolve()
            if not path.is_file():
                raise ConfigError(
                    f"preset file {where}: extends {base!r}, but there is no file {path} (a path in "
                    "'extends:' is read from the folder of the file that names it)"
                )
            if str(path) in seen:
                raise ConfigError(f"preset file {where}: extends {base!r}, which extends it back")
            return _deep_merge(self.resolve(_read_preset(path)[1], path, (*seen, str(path))), values)
        if base not in self._files or base in seen:
            raise ConfigError(
                f"preset file {where}: extends {base!r}, which is not a preset (or extends it back); "
                f"choose one of {sorted(self._files)} or give a .yaml file's path"
            )
        path, _, base_values = self._files[base]
        return _deep_merge(self.resolve(base_values, path, (*seen, base)), values)

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self._presets[name].values

    def __iter__(self) -> Iterator[str]:
        return iter(self._presets)

    def __len__(self) -> int:
        return len(self._presets)

    def purpose(self, name: str) -> str:
        return self._presets[name].purpose

    def path(self, name: str) -> Path:
        return self._presets[name].path


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A safe YAML loader (libyaml's where installed) refusing a key given twice in one mapping (PyYAML
    keeps the last)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        repeated = sorted({str(key) for key in keys if keys.count(key) > 1})
        if repeated:
            raise yaml.constructor.ConstructorError(
                None, None, f"{', '.join(repeated)} given twice in one section", node.start_mark
            )
        return super().construct_mapping(node, deep=deep)


#: A preset holds a few dozen values: a bound on them once YAML's aliases are expanded (each use
#: counts), so that a "billion laughs" file is refused before anything expands it
MAX_PRESET_VALUES = 1_000_000


def count_values(obj: Any, cap: int) -> int:
    """The values in ``obj`` (an alias counts each time it is used); counting stops past ``cap``."""
    count, stack = 0, [obj]
    while stack and count <= cap:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _read_preset(path: Path) -> tuple[str, dict[str, Any]]:
    """A preset file's purpose (its opening comment, without the ``see ...`` line) and values."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"preset file {path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    opening = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        opening.append(line[1:].strip())
    try:
        values = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader: values only, never code
    except yaml.YAMLError as error:
        raise ConfigError(f"preset file {path} is not valid YAML: {' '.join(str(error).split())}") from None
    if values is None:
        raise ConfigError(
            f"preset file {path} holds no settings: write the sections it changes (e.g. 'extends: cpu' "
            "and 'algorithm: {batch_size: 64}'), or use --preset cpu for the defaults"
        )
    if not isinstance(values, dict):
        raise ConfigError(f"preset file {path} holds a {type(values).__name__}, not sections of fields")
    if count_values(values, MAX_PRESET_VALUES) > MAX_PRESET_VALUES:
        raise ConfigError(
            f"preset file {path} expands to more than {MAX_PRESET_VALUES} values (YAML aliases count each time "
            "they are used): write the values out, without nested aliases"
        )
    return " ".join(line for line in opening if not line.startswith("see ")), values


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def preset_overrides(presets: Presets, preset: str) -> dict[str, Any]:
    """A preset's values as ``{path: value}``: a preset's name, or a YAML file of your own written
    like the presets' files (its ``extends:`` names one of ``presets`` or another file)."""
    if preset in presets:
        return flatten_sections(presets[preset])
    if not preset.endswith((".yaml", ".yml")):
        raise ConfigError(f"unknown preset {preset!r}; choose one of {sorted(presets)} or give a .yaml file")
    path = Path(preset)
    if not path.is_file():
        raise ConfigError(f"preset file {preset} not found (a preset is one of {sorted(presets)} or a .yaml file)")
    return flatten_sections(presets.resolve(_read_preset(path)[1], path, (str(path.resolve()),)))


def preset_name(preset: str) -> str:
    """A preset's name in run folders: its own, or its file's name without ``.yaml``."""
    return Path(preset).stem if preset.endswith((".yaml", ".yml")) else preset


def config_from_preset(
    config_class: type[C],
    presets: Presets,
    preset: str,
    overrides: Mapping[str, Any] | None = None,
) -> C:
    """``config_class`` with a preset's values, then ``overrides``, validated."""
    values = preset_overrides(presets, preset)
    try:
        cfg = config_class().replace(values)
    except ConfigError as error:
        raise ConfigError(f"preset {preset!r}: {error}") from None
    return cfg.replace(overrides or {}).validate()
