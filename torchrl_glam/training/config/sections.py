"""The sections every GLAM config shares (``env`` with its ``options``, ``model``, ``run``), their
bounds, and :func:`setting`: a field with its help line in the field's metadata, which ``--help``
reads (:func:`~torchrl_glam.training.config.helptext.field_help`), source or not."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any

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


def setting(default: Any = MISSING, help: str = "", *, factory: Any = MISSING) -> Any:
    """A config field whose ``help`` line is in its metadata (``field(default=..., metadata={"help":
    ...})``): ``setting(0.99, "the discount")``; a list's default through ``factory``."""
    if not help:
        raise ValueError("a config field says what it is: setting(default, 'its help line')")
    return field(default=default, default_factory=factory, metadata={"help": help})


@dataclass
class EnvConfig:
    """The environment (App. A)."""

    name: str = setting(
        DEFAULT_ENVIRONMENT,
        "a registered environment's name: one an installed package declares (listed by --help), or one a "
        "script registered with torchrl_glam.envs.register_environment before main",
    )
    goals: str = setting("train", 'the training goal set, e.g. Playground-Text\'s "train" or "simplified"')
    goal_sampling: str = setting(
        "uniform",
        'how training draws each episode\'s goal: "uniform" over the task set (the paper: the full set is then '
        '97.85% sequential) or "by_type" (a goal type uniformly, then a goal of it)',
    )
    max_steps: int = setting(10, "the time limit (the longest episode)")
    num_envs: int = setting(32, "environments stepped together (a batch of episodes)")
    options: dict[str, Any] = setting(
        help="the options the environment declares (another environment's: --help env=NAME), set as "
        "env.options.NAME=value, or NAME=value where no field has that name",
        factory=dict,
    )


@dataclass
class ModelConfig:
    """The LLM (App. C)."""

    name: str | None = setting(
        None,
        'a hub name or local folder, a .gguf file, "offline:<name>" (the shipped tiny models) or '
        '"smollm2-135m"; None: the offline tiny T5, random-init',
    )
    lora_rank: int = setting(0, "LoRA adapters' rank (peft); 0: train all weights")
    lora_alpha: int = setting(32, "LoRA's scaling numerator (the adapters' output times lora_alpha / lora_rank)")
    quantization: str | None = setting(None, 'None, "4bit" or "8bit" (bitsandbytes; with lora_rank >= 1)')
    dtype: str = setting("float32", 'the LLM\'s weights: "float32", "float16" or "bfloat16"')
    device: str = setting("cpu", 'a torch device: "cpu", "cuda", "cuda:1"')
    autocast: str | None = setting(
        None,
        '"bfloat16": the LLM\'s forward and backward under torch.autocast, its weights and optimiser '
        "float32 (mixed precision; needs dtype=float32 and a device with fast bfloat16: a GPU that "
        "supports it, a CPU with AVX512-BF16 or AMX); None: the weights' dtype throughout. Off in "
        "every preset: see the benchmarks page for what it gave",
    )
    normalization: str = setting("sum", '"sum" of token log-probs (the paper) or "mean"')
    tokenization: str = setting(
        "exact",
        '"exact": candidates tokenised as lm-evaluation-harness\'s continuations; "separate": Lamorel\'s',
    )


@dataclass
class RunConfig:
    """The run: its length, evaluations, logs, checkpoints and folder."""

    total_steps: int = setting(400_000, "environment steps (Figure 2)")
    eval_every: int = setting(10_000, "environment steps between two evaluations")
    eval_episodes: int = setting(128, "episodes per evaluation set (fixed seeds: the same every time)")
    eval_sets: list[str] = setting(
        factory=lambda: ["train", "held_out"],
        help='the evaluation sets logged (training/eval_sets.py EVAL_SETS): "train" (training goals, goal types '
        'uniform where the environment draws by type), "held_out", "train_distribution" (training goals as '
        "training samples them), "
        '"train_sampled" and "held_out_sampled" (with the sampled policy instead of the greedy one)',
    )
    log_every: int = setting(1_000, "environment steps between two log rows")
    checkpoint_every: int = setting(10_000, "environment steps between two checkpoints (--resume continues)")
    seed: int = setting(0, "the run's seed: same seed, threads and versions give the same run")
    run_dir: str = setting("runs/glam", "the root of the run folders; --run-dir names one folder")
    num_threads: int = setting(
        1,
        "torch's intra-op threads. 1: the small CPU models gain little from more, and two runs (or a run and "
        "a test suite) with OpenMP threads spinning against each other fell from ~60 to ~3 environment "
        "steps/s. Raise it on a node of your own (e.g. --cpus-per-task) with a big model.",
    )
    loggers: list[str] = setting(
        factory=lambda: ["csv"],
        help='"csv" (TorchRL\'s CSVLogger); "tensorboard" with the [tensorboard] extra; "wandb" with wandb',
    )


#: Sections whose ``name`` a bare ``section=value`` sets (``env=babyai``, ``model=none``).
NAMED_SECTIONS = ("env", "model")
