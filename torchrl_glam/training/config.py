"""What the configs of every GLAM algorithm share: :class:`GLAMConfig` (the environment, the model
and the run's fields; validation naming the bad field; ``replace`` with nearest-name hints; JSON;
a field's name from before 0.2.0 refused with its new name) and the module-level helpers
(presets, typed command-line overrides). Each algorithm's config and presets live in its folder:
``torchrl_glam/algorithms/<algorithm>/config.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import math
import re
import types
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from torchrl_glam.training.eval_sets import EVAL_SETS

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment

C = TypeVar("C", bound="GLAMConfig")

#: The environment of a config that names none: ``torchrl_glam.envs.DEFAULT_ENVIRONMENT``
#: (a test checks they agree), written here so that a config, its presets and the command line
#: (``--help``, a refused field) need no import of the environments, torch or TorchRL: those load
#: when a config is validated or its :attr:`~GLAMConfig.environment` is asked for.
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
class GLAMConfig:
    """The fields and behaviour shared by the configs of every GLAM algorithm.

    A subclass adds its fields and, in :meth:`_checks` / :meth:`_expected`, the conditions on them
    (it extends the base's dictionaries, so every config checks the shared fields the same way).

    A field renamed in 0.2.0 is refused under its old name (``FORMER_NAMES``: old name -> new
    name, kept for the message only) wherever a config is written down: :meth:`replace`,
    :meth:`from_dict` (a saved config.json), :func:`parse_overrides`, the launcher's sweeps and a
    resume's saved config raise a :class:`ConfigError` naming the new name.
    """

    FORMER_NAMES: ClassVar[dict[str, str]] = {}

    # --- environment (App. A)
    # a registered environment's name ("playground", "babyai", or one a script registered with
    # torchrl_glam.envs.register_environment before main)
    env: str = DEFAULT_ENVIRONMENT
    goals: str = "train"  # the training goal set, e.g. Playground-Text's "train" or "simplified"
    # how training draws each episode's goal: "uniform" over the task set (the paper: the full set is
    # then 97.85% sequential) or "by_type" (a goal type uniformly, then a goal of it)
    goal_sampling: str = "uniform"
    num_objects: int | None = None  # Playground-Text only; None: 6, or 3 for "simplified"
    # BabyAI-Text only: the goal types (task kinds) its Mixed levels draw, for training and
    # evaluation alike, e.g. [goto, pickup]; None: all five
    goal_types: list[str] | None = None
    # BabyAI-Text only: past observations shown in the prompt before the current one, each with the
    # action taken after it (GLAM shows 2); 0: the current observation only
    history: int = 0
    # BabyAI-Text only: each episode's time limit is minigrid's for its mission (GLAM: 64 steps for go
    # to / pick up, 128 for open, put next to and the sequences), at most max_steps
    level_time_limits: bool = False
    max_steps: int = 10  # the time limit (the longest episode)
    num_envs: int = 32  # environments stepped together (a batch of episodes)
    # --- model (App. C)
    # a hub name or local folder, a .gguf file, "offline:<name>" (the shipped tiny models) or
    # "smollm2-135m"; None: the offline tiny T5, random-init
    model: str | None = None
    lora_rank: int = 0  # LoRA adapters' rank (peft); 0: train all weights
    lora_alpha: int = 32  # LoRA's scaling numerator (the adapters' output times lora_alpha / lora_rank)
    quantization: str | None = None  # None, "4bit" or "8bit" (bitsandbytes; with lora_rank >= 1)
    dtype: str = "float32"  # the LLM's weights: "float32", "float16" or "bfloat16"
    device: str = "cpu"  # a torch device: "cpu", "cuda", "cuda:1"
    normalization: str = "sum"  # "sum" of token log-probs (the paper) or "mean"
    # "exact": candidates tokenised as lm-evaluation-harness's continuations; "separate": Lamorel's
    tokenization: str = "exact"
    # --- run
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

    @property
    def environment(self) -> TextEnvironment:
        """The :class:`~torchrl_glam.envs.protocol.TextEnvironment` named by ``env``, with the
        config's values of its ``state_options`` (BabyAI-Text: ``history``)."""
        from torchrl_glam.envs import get_environment

        try:
            environment = get_environment(self.env)
        except ImportError as error:  # an optional dependency (BabyAI-Text: minigrid)
            raise ConfigError(
                f"env={self.env!r} needs a package that is not installed ({error}); "
                "for env=babyai: pip install minigrid"
            ) from None
        except ValueError as error:
            raise ConfigError(f"bad config value env={self.env!r}: {error}") from None
        return environment.with_options(**{name: getattr(self, name) for name in environment.state_options})

    def _has(self, capability: str) -> bool:
        """Whether ``env`` has an optional capability of the protocol (an unknown ``env`` fails its
        own check first)."""
        return self.env not in _environment_names() or self.environment.has(capability)

    def _lacks(self, capability: str) -> str:
        """The end of an error message for a field whose value needs ``capability``."""
        return "" if self._has(capability) else f" (env={self.env!r} has no {capability!r}: switch it off)"

    def _checks(self) -> dict[str, bool]:
        """Field name -> whether its value is acceptable (checked in this order)."""
        if self.env not in _environment_names():
            return {"env": False}
        environment = self.environment
        return {
            "goals": self.goals in environment.goal_sets,
            "goal_sampling": self.goal_sampling in ("uniform", "by_type"),
            "normalization": self.normalization in ("sum", "mean"),
            "tokenization": self.tokenization in ("exact", "separate"),
            "quantization": self.quantization in (None, "4bit", "8bit"),
            "seed": 0 <= self.seed <= MAX_SEED,
            "num_envs": self.num_envs >= 1,
            "max_steps": 1 <= self.max_steps <= MAX_EPISODE_STEPS,
            "total_steps": 1 <= self.total_steps <= MAX_TOTAL_STEPS,
            "eval_every": self.eval_every >= 1,
            "eval_episodes": self.eval_episodes >= 1,
            "eval_sets": (
                len(self.eval_sets) >= 1
                and len(set(self.eval_sets)) == len(self.eval_sets)
                and set(self.eval_sets) <= set(EVAL_SETS)
                and (
                    environment.held_out_goal_set is not None
                    or all(EVAL_SETS[name].goals != "held_out" for name in self.eval_sets)
                )
            ),
            "log_every": self.log_every >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
            "num_threads": 1 <= self.num_threads <= MAX_THREADS,
            "lora_rank": self.lora_rank >= 0,
            "lora_alpha": self.lora_alpha >= 1,
            "num_objects": self.num_objects is None
            or ("num_objects" in environment.config_options and 2 <= self.num_objects <= len(environment.object_names)),
            "goal_types": self.goal_types is None
            or (
                "goal_types" in environment.config_options
                and len(self.goal_types) >= 1
                and len(set(self.goal_types)) == len(self.goal_types)
                and set(self.goal_types) <= set(environment.goal_types)
            ),
            "history": self.history == 0
            or ("history" in environment.state_options and 1 <= self.history <= environment.max_history),
            "level_time_limits": not self.level_time_limits or "level_time_limits" in environment.config_options,
            # the hindsight transcripts are Playground-Text's only
            "model": not (self.env != DEFAULT_ENVIRONMENT and _is_hindsight_tiny(self.model)),
            # 4-bit / 8-bit weights cannot be trained: only LoRA adapters on top of them can
            "quantization_needs_lora": self.quantization is None or self.lora_rank >= 1,
            "device": _is_device(self.device),
            "dtype": self.dtype in ("float32", "float16", "bfloat16"),
            "loggers": all(name in ("csv", "tensorboard", "wandb") for name in self.loggers),
            "run_dir": isinstance(self.run_dir, str) and bool(self.run_dir.strip()),
        }

    def _expected(self) -> dict[str, str]:
        """Field name -> what a good value is, for the error message (default: see the class)."""
        if self.env not in _environment_names():
            return {
                "env": f"a registered environment: one of {_environment_names()} (register your own "
                "with torchrl_glam.envs.register_environment before main)"
            }
        environment = self.environment
        return {
            "goals": f"a goal set of env={self.env!r}: one of {environment.goal_sets}",
            "seed": f"an integer from 0 to {MAX_SEED} (numpy's generators take seeds below 2**32)",
            "max_steps": f"an episode length from 1 to {MAX_EPISODE_STEPS}",
            "total_steps": f"a number of environment steps from 1 to {MAX_TOTAL_STEPS:.0e}",
            "num_threads": f"from 1 to {MAX_THREADS} torch threads (about the cores of the node)",
            "num_objects": (
                f"none, or from 2 to {len(environment.object_names)} objects per scene"
                if "num_objects" in environment.config_options
                else f"none: env={self.env!r} has no num_objects option"
            ),
            "goal_types": (
                f"none, or a non-empty list of distinct goal types among {environment.goal_types}"
                if "goal_types" in environment.config_options
                else f"none: env={self.env!r} has no goal_types option"
            ),
            "history": (
                f"from 0 to {environment.max_history} past observations in the prompt (GLAM: 2)"
                if "history" in environment.state_options
                else f"0: env={self.env!r} has no history option"
            ),
            "level_time_limits": f"false: env={self.env!r} has no level time limits (BabyAI-Text has)",
            "model": (
                f"a model for env={self.env!r}: the tiny models pretrained with hindsight goals exist "
                "for Playground-Text only; offline:tiny-t5-pretrained is pretrained on this environment's "
                "own random-play transcripts, model=none is a random-init tiny model of its vocabulary"
            ),
            "goal_sampling": "'uniform' (over the task set) or 'by_type' (goal types equally often)",
            "normalization": "'sum' or 'mean'",
            "tokenization": "'exact' or 'separate'",
            "quantization": "none, '4bit' or '8bit'",
            "loggers": "a list of 'csv', 'tensorboard', 'wandb'",
            "eval_sets": f"a non-empty list of distinct names among {sorted(EVAL_SETS)}"
            + (
                ""
                if environment.held_out_goal_set
                else f" but the held-out ones (env={self.env!r} has no held-out goals)"
            ),
            "quantization_needs_lora": "lora_rank >= 1 with quantization (quantized weights cannot "
            "be trained; only LoRA adapters on them), or quantization=none",
            "device": "'cpu', 'cuda', 'cuda:N' or another torch device name",
            "dtype": "'float32', 'float16' or 'bfloat16'",
            "run_dir": "a directory path (pass --run-dir DIR; an empty one would mean the current folder)",
            **dict.fromkeys(
                ["num_envs", "eval_every", "eval_episodes", "log_every", "checkpoint_every"], "an integer >= 1"
            ),
            "lora_rank": "an integer >= 0 (0: every weight of the LLM trains, no adapters)",
            "lora_alpha": "an integer >= 1",
        }

    def validate(self: C) -> C:
        """Raises a :class:`ConfigError` naming the first field with a bad value (of the wrong type first:
        ``num_envs: 8.5`` or ``true`` from a YAML file would pass the comparisons below)."""
        hints = get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            if not _has_type(value, hints[f.name]):
                raise ConfigError(
                    f"bad config value {f.name}={value!r}: expected {_type_name(hints[f.name])}, "
                    f"got {type(value).__name__}"
                )
        for f in fields(self):  # inf and nan pass every comparison below the wrong way
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"bad config value {f.name}={value!r}: expected a finite number")
        expected = self._expected()
        for name, ok in self._checks().items():
            if not ok:
                hint = expected.get(name, f"see {type(self).__name__}")
                shown = (
                    f"quantization={self.quantization!r} with lora_rank={self.lora_rank}"
                    if name == "quantization_needs_lora"
                    else f"{name}={getattr(self, name)!r}"
                )
                raise ConfigError(f"bad config value {shown}: expected {hint}")
        return self

    def check_device(self) -> None:
        """Raises before any model loads when ``device`` names an accelerator this machine lacks
        (not part of :meth:`validate`: a login node without a GPU validates GPU configs)."""
        import torch

        kind = torch.device(self.device).type
        if kind == "cuda" and not torch.cuda.is_available():
            raise ConfigError(
                f"device={self.device!r} but torch sees no CUDA GPU here (torch {torch.__version__}, "
                f"CUDA build: {torch.version.cuda or 'none'}): run on a GPU node, install a CUDA build "
                "of torch, or pass device=cpu (with a model that fits a CPU, e.g. --preset cpu)"
            )

    @classmethod
    def refuse_former_names(cls, names: Iterable[str], reason: str = "") -> None:
        """Raises a :class:`ConfigError` when ``names`` holds a field's name from before 0.2.0
        (``FORMER_NAMES``), naming the new one; ``reason``: appended to the message."""
        former = [name for name in names if name in cls.FORMER_NAMES]
        if former:
            raise ConfigError(
                "; ".join(
                    f"config field {old!r} was renamed {cls.FORMER_NAMES[old]!r} in 0.2.0: use {cls.FORMER_NAMES[old]}"
                    for old in former
                )
                + reason
            )

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes``; unknown names raise with the nearest field names (a field's
        name from before 0.2.0 with its new name)."""
        type(self).refuse_former_names(changes)
        names = [f.name for f in fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ConfigError("; ".join(_unknown_field(name, names, type(self).__name__) for name in unknown))
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls: type[C], values: dict[str, Any]) -> C:
        """The config of a saved ``to_dict()`` (a run's config.json), validated."""
        return cls().replace(**values).validate()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _environment_names() -> list[str]:
    """The registered environments' names (imports the environments: validation needs them)."""
    from torchrl_glam.envs import environment_names

    return environment_names()


def _is_hindsight_tiny(model: str | None) -> bool:
    """Whether ``model`` names a tiny model pretrained on Playground-Text's hindsight transcripts."""
    return model is not None and model.startswith("offline:tiny-") and model.endswith("-hindsight")


def _has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the field type ``hint`` (bool is no int here; an int is a float)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_has_type(value, option) for option in get_args(hint))
    if origin is list:
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


def field_help(config_class: type[GLAMConfig]) -> dict[str, str]:
    """Each field's help line: the comment above the field or at the end of its line in the source
    of ``config_class`` and its bases (``# ---`` lines head sections and are skipped).

    Hand-written: dataclasses keep no comments, and the parsers that read them (tyro's) are not
    public APIs. Without the source (a frozen install) the help is empty."""
    help_lines: dict[str, str] = {}
    for klass in reversed(config_class.__mro__):
        if "__dataclass_fields__" not in vars(klass):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
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


def _unknown_field(name: str, names: list[str], class_name: str) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"unknown config field {name!r}; did you mean {close[0]!r}?"
    return f"unknown config field {name!r}: not a field of {class_name} (--help lists them)"


def _type_name(hint: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "text", type(None): "none"}
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_type_name(option) for option in get_args(hint))
    if get_origin(hint) is list:
        return f"a list of {_type_name(get_args(hint)[0])}"
    return names.get(hint, str(hint))


def _is_device(name: str) -> bool:
    import torch

    try:
        torch.device(name)
    except (RuntimeError, TypeError):
        return False
    return True


def config_from_preset(
    config_class: type[C], presets: dict[str, dict[str, Any]], preset: str, overrides: dict[str, Any] | None = None
) -> C:
    """``config_class`` with a preset's values, then ``overrides``, validated."""
    if preset not in presets:
        raise ConfigError(f"unknown preset {preset!r}; choose one of {sorted(presets)}")
    return config_class().replace(**presets[preset]).replace(**(overrides or {})).validate()


def _coerce(name: str, text: str, annotation: Any) -> Any:
    kind = str(annotation)
    if text.lower() in ("none", "null") and "None" in kind:
        return None
    if kind.startswith("bool") or kind == "<class 'bool'>":
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"bad config value {name}={text!r}: expected true or false")
    try:
        if "list" in kind:
            return [item for item in text.split(",") if item]
        if "int" in kind and "float" not in kind:
            return int(text.replace("_", ""))
        if "float" in kind:
            return float(text)
    except ValueError:
        raise ConfigError(f"bad config value {name}={text!r}: expected {_type_name(annotation)}") from None
    return text


#: One override's text -> its typed value, by the field's annotation (sweep files' text values too).
coerce_value = _coerce


def parse_overrides(pairs: list[str], config_class: type[GLAMConfig]) -> dict[str, Any]:
    """``["batch_size=64", "her=false", "model=none"]`` -> typed values, by ``config_class``'s fields."""
    hints = get_type_hints(config_class)
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"override {pair!r} is not key=value (e.g. batch_size=64)")
        name, text = pair.split("=", 1)
        if name not in {f.name for f in fields(config_class)}:
            config_class().replace(**{name: None})  # raises with the new name or the nearest field names
        out[name] = _coerce(name, text, hints[name])
    return out
