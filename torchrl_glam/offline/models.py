"""The offline models: their names, the recipes their weights depend on (with the pretraining
defaults), where each one is (shipped or in the cache), and how it is found.

``offline:<name>`` models (:data:`OFFLINE_MODELS`) are either shipped with the package
(:mod:`~torchrl_glam.offline.shipped`: ``offline/weights/`` and its manifest) or built on this
machine into the cache (:func:`~torchrl_glam.storage.cache_root`) by the builders beside this
module (:mod:`~torchrl_glam.offline.tiny`, :mod:`~torchrl_glam.offline.pretraining`; a training
run builds the one it needs). Each lives under its recipe's version name, so a build of another
recipe is never taken for this one.
:func:`offline_model_path` finds a model and never builds one (``modules/loading.py`` loads through
it): a model that is not there is refused with the command that builds it
(:class:`OfflineModelNotBuilt`). This module imports no torch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from torchrl_glam.envs import DEFAULT_ENVIRONMENT, get_environment
from torchrl_glam.offline.shipped import recipe_version, shipped_model_path
from torchrl_glam.storage import cache_root

ModelKind = Literal["t5", "llama"]

#: Bump when the recipe below changes, so stale cached builds are not reused.
RECIPE_VERSION = 1
#: Standard deviation of the output projection. A default T5 init gives token logits with a std of
#: ~11 (peaked, far from uniform); the initial policy of SAC-GLAM should be close to uniform over the
#: candidates, as a pre-trained LLM that knows nothing of the task would be. Only the output head is
#: shrunk (rather than the whole network through ``initializer_factor``, which also scales the final
#: layer norm) so that the hidden states the critic reads keep their usual unit scale.
OUTPUT_INIT_STD = 0.01

#: Bump when the data or the objective below change (the values of the defaults are hashed into the
#: recipe's version name by themselves), so stale cached or shipped builds are not reused.
PRETRAINING_VERSION = 1
DEFAULT_STEPS = 600
DEFAULT_BATCH_SIZE = 128
DEFAULT_LR = 1e-3
DEFAULT_SEED = 0
#: The transcript streams, by name: "random" (:class:`~torchrl_glam.offline.transcripts.RandomPlayTranscripts`,
#: the ``cpu`` presets' model) and "hindsight" (:class:`~torchrl_glam.offline.transcripts.HindsightTranscripts`,
#: half of them with hindsight goals).
DATA = ("random", "hindsight")
HINDSIGHT_SHARE = 0.5

OFFLINE_PREFIX = "offline:"
#: The models built on this machine, by name: random-init, or pretrained on Playground-Text's
#: random-play transcripts (``-pretrained``) or on random-play transcripts half of them with hindsight
#: goals (``-hindsight``), or on BabyAI-Text's (``-pretrained-babyai``; see
#: :mod:`torchrl_glam.offline.pretraining`). The T5 ones ship with the package
#: (:mod:`torchrl_glam.offline.shipped`); the others are built into the cache by a training run that
#: names one, or by ``python -m torchrl_glam.offline NAME``.
OFFLINE_MODELS = (
    "tiny-t5",
    "tiny-llama",
    "tiny-t5-pretrained",
    "tiny-llama-pretrained",
    "tiny-t5-hindsight",
    "tiny-llama-hindsight",
    "tiny-t5-pretrained-babyai",
    "tiny-llama-pretrained-babyai",
)


def tiny_config_fields(kind: ModelKind, vocab_size: int, **overrides) -> dict:
    """The fields of :func:`tiny_model_config` as a plain dict (also the recipe's fingerprint)."""
    if kind == "t5":
        fields = dict(
            vocab_size=vocab_size,
            d_model=64,
            d_kv=16,
            num_heads=4,
            d_ff=128,
            num_layers=2,
            num_decoder_layers=2,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            dropout_rate=0.0,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
        fields.update(overrides)
        if "num_layers" in overrides and "num_decoder_layers" not in overrides:
            fields["num_decoder_layers"] = overrides["num_layers"]
        return fields
    if kind == "llama":
        fields = dict(
            vocab_size=vocab_size,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            tie_word_embeddings=False,
            attention_dropout=0.0,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=3,
        )
        fields.update(overrides)
        return fields
    raise ValueError(f"unknown tiny model kind {kind!r}: expected 't5' or 'llama'")


def tiny_model_recipe(kind: ModelKind = "t5", seed: int = 0, environment=DEFAULT_ENVIRONMENT) -> dict:
    """Everything the random-init tiny model's weights depend on; its hash is the version name
    (:func:`~torchrl_glam.offline.shipped.recipe_version`). ``RECIPE_VERSION`` covers the rest
    (the code of the build itself): bump it when that changes. The environment's vocabulary is
    part of it, so each environment's model has its own version."""
    words = "\n".join(get_environment(environment).vocabulary_words())
    config = tiny_config_fields(kind, vocab_size=0)
    del config["vocab_size"]  # the vocabulary is in its own hash
    return {
        "model": f"tiny-{kind}",
        "code_version": RECIPE_VERSION,
        "seed": seed,
        "output_init_std": OUTPUT_INIT_STD,
        "config": config,
        "vocabulary_sha256": hashlib.sha256(words.encode()).hexdigest(),
    }


def pretraining_recipe(
    kind: ModelKind = "t5",
    steps: int = DEFAULT_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    seed: int = DEFAULT_SEED,
    data: str = "random",
    environment=DEFAULT_ENVIRONMENT,
) -> dict:
    """Everything the pretrained model's weights depend on, its starting point included; its hash
    is the version name of the cache directory and of the shipped weights. ``environment``: the
    :class:`~torchrl_glam.envs.protocol.TextEnvironment` (or its name) of the transcripts, whose
    vocabulary the model's tokenizer holds (default Playground-Text)."""
    env = get_environment(environment)
    recipe = {
        "start_from": tiny_model_recipe(kind, seed=0, environment=env),
        "pretraining_version": PRETRAINING_VERSION,
        "data": (
            f"random-play transcripts ({' + '.join(transcript_goal_sets(env))}, 64 environments, "
            f"{env.pretraining_max_steps} steps)"
        ),
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "warmup_steps": 100,
        "grad_clip": 1.0,
        "optimizer": "Adam",
    }
    if not env.legacy_offline_names:  # a legacy recipe stays as it was, so its version name does too
        recipe["environment"] = env.name
    if env.text_version:  # the transcripts' text (BabyAI-Text: GLAM's or the former wording)
        recipe["text"] = env.text_version
    if data == "hindsight":  # the "random" recipe stays as it was, so its version name does too
        recipe["data"] += f", {HINDSIGHT_SHARE:g} of them with hindsight goals (reported later in the episode)"
    elif data != "random":
        raise ValueError(f"unknown pretraining data {data!r}; choose one of {DATA}")
    return recipe


def transcript_goal_sets(environment) -> tuple[str, ...]:
    return environment.pretraining_goal_sets or environment.goal_sets[:1]


def offline_name(kind: ModelKind = "t5", data: str = "random", environment=DEFAULT_ENVIRONMENT) -> str:
    """The offline model name of a pretraining stream: ``tiny-t5-pretrained``, ``tiny-t5-hindsight``
    (Playground-Text), ``tiny-t5-pretrained-babyai`` (another environment's transcripts)."""
    env = get_environment(environment)
    suffix = "" if env.legacy_offline_names else f"-{env.name}"
    return f"tiny-{kind}-" + ("pretrained" if data == "random" else data) + suffix


def is_complete(directory: Path) -> bool:
    return (directory / "config.json").exists() and any(directory.glob("*.safetensors"))


class OfflineModelNotBuilt(FileNotFoundError):
    """An offline model that is neither shipped nor built on this machine; ``path``: the cache
    directory it is built into (:mod:`torchrl_glam.offline` builds it there)."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


class BuildStopped(Exception):
    """A build stopped by Ctrl-C or SIGTERM at the end of a step, its state saved where the next
    build of the same recipe continues from it (``python -m torchrl_glam.offline`` or a training run
    that needs the model). Command lines print its one line and exit with :attr:`exit_code`."""

    #: The training scripts' exit code for a stop with its state saved (``training.preemption.PREEMPTED``).
    exit_code = 3


def build_command(name: str, environment=DEFAULT_ENVIRONMENT) -> str:
    """The command that builds the offline model ``name`` into the cache."""
    key = name.removeprefix(OFFLINE_PREFIX)
    env = get_environment(environment)
    return f"python -m torchrl_glam.offline {key}" + ("" if env.legacy_offline_names else f" --env {env.name}")


def parse_offline_name(name: str, environment=DEFAULT_ENVIRONMENT) -> tuple[ModelKind, str | None, Any]:
    """(kind, pretraining data or ``None`` for a random-init model, environment) of the offline
    model ``name``; the environment is the name's suffix (``-babyai``) when it has one, else
    ``environment``."""
    key = name.removeprefix(OFFLINE_PREFIX)
    if key not in OFFLINE_MODELS:
        raise ValueError(
            f"unknown offline model {name!r}; choose one of {[OFFLINE_PREFIX + m for m in OFFLINE_MODELS]}"
        )
    _, kind, *trained = key.split("-")  # "tiny", "t5", then e.g. "pretrained", "babyai"
    if not trained:
        return kind, None, environment
    return kind, "hindsight" if trained[0] == "hindsight" else "random", trained[1] if len(trained) > 1 else environment


def offline_location(name: str, environment=DEFAULT_ENVIRONMENT) -> tuple[str, str]:
    """(directory name, recipe version) of the offline model ``name`` in the vocabulary of
    ``environment`` (see :func:`parse_offline_name`)."""
    kind, data, environment = parse_offline_name(name, environment)
    if data is not None:
        recipe = pretraining_recipe(kind, data=data, environment=environment)
        return offline_name(kind, data, environment), recipe_version(recipe)
    return f"tiny-{kind}", recipe_version(tiny_model_recipe(kind, environment=environment))


def offline_model_path(name: str, environment=DEFAULT_ENVIRONMENT) -> Path:
    """The directory of the offline model ``name`` (see :func:`offline_location`): its shipped copy
    (checked against the manifest), else its build in the cache. Builds nothing:
    :class:`OfflineModelNotBuilt` names the command that builds it."""
    _, data, named_environment = parse_offline_name(name, environment)
    directory, version = offline_location(name, environment)
    # the shipped random-init model holds the words of the environment with legacy names; a
    # pretrained one's name says its own
    if data is not None or get_environment(named_environment).legacy_offline_names:
        shipped = shipped_model_path(directory, version)
        if shipped is not None:
            return shipped
    cached = cache_root() / f"{directory}-{version}"
    if is_complete(cached):
        return cached
    raise OfflineModelNotBuilt(
        f"the offline model {name} (recipe {version}) is not built on this machine (looked in {cached}). "
        f"Build it once with `{build_command(name, environment)}` (a training run that names it builds it itself)",
        cached,
    )
