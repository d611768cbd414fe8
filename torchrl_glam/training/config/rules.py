"""The conditions a config's values meet, each beside the words of its refusal: one table of
:class:`Rule`, the shared sections' in :data:`RULES`; an algorithm's config class extends it
(``RULES = (*GLAMConfig.RULES, Rule(...), ...)``) and :meth:`GLAMConfig.validate
<torchrl_glam.training.config.GLAMConfig.validate>` checks them in order."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchrl_glam.training.config.sections import MAX_EPISODE_STEPS, MAX_SEED, MAX_THREADS, MAX_TOTAL_STEPS
from torchrl_glam.training.eval_sets import EVAL_SETS

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment


@dataclass(frozen=True)
class Rule:
    """A condition on a config and what a good value is.

    ``check(cfg, environment)`` says whether the value is acceptable, ``expected`` the end of the
    refusal ("bad config value <shown>: expected <expected>"), as text or as ``expected(cfg,
    environment)``; ``shown(cfg)`` what the refusal shows of the values (default ``path=value``).
    ``environment`` is the config's :class:`~torchrl_glam.envs.protocol.TextEnvironment`, with
    its options."""

    path: str
    check: Callable[[Any, TextEnvironment], bool]
    expected: str | Callable[[Any, TextEnvironment], str]
    shown: Callable[[Any], str] | None = None

    def words(self, cfg: Any, environment: TextEnvironment) -> str:
        return self.expected if isinstance(self.expected, str) else self.expected(cfg, environment)


def lacks(cfg: Any, environment: TextEnvironment, capability: str) -> str:
    """The end of a refusal for a field whose value needs an optional ``capability`` of the
    environment (``TextEnvironment.has``): empty when it has it."""
    return "" if environment.has(capability) else f" (env={cfg.env.name!r} has no {capability!r}: switch it off)"


def minimum(path: str, bound: int) -> Rule:
    """The rule of an integer field that takes ``bound`` or more."""
    return Rule(path, lambda c, e: c.get(path) >= bound, f"an integer >= {bound}")


def environment_names() -> list[str]:
    """The registered environments' names (imports the environments: validation needs them)."""
    from torchrl_glam.envs import environment_names

    return environment_names()


def model_problem(cfg: Any, environment: TextEnvironment) -> str | None:
    """Why ``model.name`` means no model for the environment (an unknown offline model, or one of
    another environment's), read by :func:`~torchrl_glam.offline.resolve.resolve` as the run will
    read it; ``None`` when it means one."""
    from torchrl_glam.offline.resolve import resolve  # no torch

    try:
        resolve(cfg.model.name, environment)
    except ValueError as error:
        return str(error)
    return None


#: The device names ``torch.device`` accepts (c10's device types, an optional index): a config is
#: checked without importing torch, which takes seconds (tests/training/test_light_command_line.py
#: compares the two).
DEVICE_NAME = re.compile(
    r"(cpu|cuda|mps|xpu|hip|xla|meta|hpu|mtia|maia|ipu|ve|fpga|lazy|vulkan|opengl|opencl|ideep|mkldnn|privateuseone)"
    r"(:\d+)?"
)


def is_device(name: str) -> bool:
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


def _eval_sets_ok(run, environment) -> bool:
    names = run.eval_sets
    return (
        len(names) >= 1
        and len(set(names)) == len(names)
        and set(names) <= set(EVAL_SETS)
        and (environment.held_out_goal_set is not None or all(EVAL_SETS[name].goals != "held_out" for name in names))
    )


#: The rule checked before the others, which read the environment it names.
ENVIRONMENT_RULE = Rule(
    "env.name",
    lambda c, e: c.env.name in environment_names(),
    lambda c, e: (
        f"a registered environment: one of {environment_names()} (register your own "
        "with torchrl_glam.envs.register_environment before main)"
    ),
)

#: The shared sections' rules, in the order they are checked (after :data:`ENVIRONMENT_RULE`).
RULES: tuple[Rule, ...] = (
    Rule(
        "env.goals",
        lambda c, e: c.env.goals in e.goal_sets,
        lambda c, e: f"a goal set of env={c.env.name!r}: one of {e.goal_sets}",
    ),
    Rule(
        "env.goal_sampling",
        lambda c, e: c.env.goal_sampling in ("uniform", "by_type"),
        "'uniform' (over the task set) or 'by_type' (goal types equally often)",
    ),
    minimum("env.num_envs", 1),
    Rule(
        "env.max_steps",
        lambda c, e: 1 <= c.env.max_steps <= MAX_EPISODE_STEPS,
        f"an episode length from 1 to {MAX_EPISODE_STEPS}",
    ),
    Rule("model.normalization", lambda c, e: c.model.normalization in ("sum", "mean"), "'sum' or 'mean'"),
    Rule("model.tokenization", lambda c, e: c.model.tokenization in ("exact", "separate"), "'exact' or 'separate'"),
    Rule(
        "model.quantization",
        lambda c, e: c.model.quantization in (None, "4bit", "8bit"),
        "none, '4bit' or '8bit'",
    ),
    # an offline model name means a model of the environment's own words (resolve reads it once)
    Rule(
        "model.name",
        lambda c, e: model_problem(c, e) is None,
        lambda c, e: f"a model of env={c.env.name!r} ({model_problem(c, e)})",
    ),
    # 4-bit / 8-bit weights cannot be trained: only LoRA adapters on top of them can
    Rule(
        "quantization_needs_lora",
        lambda c, e: c.model.quantization is None or c.model.lora_rank >= 1,
        "lora_rank >= 1 with quantization (quantized weights cannot be trained; only LoRA adapters on "
        "them), or quantization=none",
        shown=lambda c: f"model.quantization={c.model.quantization!r} with model.lora_rank={c.model.lora_rank}",
    ),
    Rule(
        "model.device",
        lambda c, e: is_device(c.model.device),
        "'cpu', 'cuda', 'cuda:N' or another torch device name",
    ),
    Rule(
        "model.dtype",
        lambda c, e: c.model.dtype in ("float32", "float16", "bfloat16"),
        "'float32', 'float16' or 'bfloat16'",
    ),
    Rule(
        "model.autocast",
        lambda c, e: (
            c.model.autocast in (None, "bfloat16") and (c.model.autocast is None or c.model.dtype == "float32")
        ),
        "None or 'bfloat16', with model.dtype=float32 (autocast computes in bfloat16 from float32 weights)",
        lambda c: f"model.autocast={c.model.autocast!r} with model.dtype={c.model.dtype!r}",
    ),
    Rule(
        "model.lora_rank",
        lambda c, e: c.model.lora_rank >= 0,
        "an integer >= 0 (0: every weight of the LLM trains, no adapters)",
    ),
    minimum("model.lora_alpha", 1),
    Rule(
        "run.seed",
        lambda c, e: 0 <= c.run.seed <= MAX_SEED,
        f"an integer from 0 to {MAX_SEED} (numpy's generators take seeds below 2**32)",
    ),
    Rule(
        "run.total_steps",
        lambda c, e: 1 <= c.run.total_steps <= MAX_TOTAL_STEPS,
        f"a number of environment steps from 1 to {MAX_TOTAL_STEPS:.0e}",
    ),
    minimum("run.eval_every", 1),
    minimum("run.eval_episodes", 1),
    Rule(
        "run.eval_sets",
        lambda c, e: _eval_sets_ok(c.run, e),
        lambda c, e: (
            f"a non-empty list of distinct names among {sorted(EVAL_SETS)}"
            + ("" if e.held_out_goal_set else f" but the held-out ones (env={c.env.name!r} has no held-out goals)")
        ),
    ),
    minimum("run.log_every", 1),
    minimum("run.checkpoint_every", 1),
    Rule(
        "run.num_threads",
        lambda c, e: 1 <= c.run.num_threads <= MAX_THREADS,
        f"from 1 to {MAX_THREADS} torch threads (about the cores of the node)",
    ),
    Rule(
        "run.loggers",
        lambda c, e: all(name in ("csv", "tensorboard", "wandb") for name in c.run.loggers),
        "a list of 'csv', 'tensorboard', 'wandb'",
    ),
    Rule(
        "run.run_dir",
        lambda c, e: bool(c.run.run_dir.strip()),
        "a directory path (pass --run-dir DIR; an empty one would mean the current folder)",
    ),
)
