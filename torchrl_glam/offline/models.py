"""The offline models: their names and the recipes their weights depend on (with the pretraining
defaults).

``offline:<name>`` models (:data:`OFFLINE_MODELS`) are either shipped with the package
(:mod:`~torchrl_glam.offline.shipped`: ``offline/weights/`` and its manifest) or built on this
machine into the cache (:func:`~torchrl_glam.storage.cache_root`) by the builders beside this
module (:mod:`~torchrl_glam.offline.tiny`, :mod:`~torchrl_glam.offline.pretraining`). Each lives
under its recipe's version name, so a build of another recipe is never taken for this one.
:func:`~torchrl_glam.offline.resolve.resolve` reads a name for an environment and finds or builds
the model; each environment's transcripts follow its :mod:`~torchrl_glam.offline.recipes` entry.
This module imports no torch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from torchrl_glam.offline.recipes import recipe_of, vocabulary_environment

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment

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


def tiny_model_recipe(kind: ModelKind = "t5", seed: int = 0, environment: TextEnvironment | None = None) -> dict:
    """Everything the random-init tiny model's weights depend on; its hash is the version name
    (:func:`~torchrl_glam.offline.shipped.recipe_version`). ``RECIPE_VERSION`` covers the rest
    (the code of the build itself): bump it when that changes. The vocabulary of ``environment``
    (``None``: Playground-Text's, see :func:`~torchrl_glam.offline.recipes.vocabulary_environment`)
    is part of it, so each environment's model has its own version."""
    words = "\n".join(vocabulary_environment(environment).vocabulary_words())
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
    environment: TextEnvironment | None = None,
) -> dict:
    """Everything the pretrained model's weights depend on, its starting point included; its hash
    is the version name of the cache directory and of the shipped weights. ``environment``: the
    :class:`~torchrl_glam.envs.protocol.TextEnvironment` of the transcripts, whose vocabulary the
    model's tokenizer holds (``None``: Playground-Text), made by its
    :class:`~torchrl_glam.offline.recipes.TranscriptRecipe`."""
    env = vocabulary_environment(environment)
    transcripts = recipe_of(env)
    recipe = {
        "start_from": tiny_model_recipe(kind, seed=0, environment=env),
        "pretraining_version": PRETRAINING_VERSION,
        "data": (
            f"random-play transcripts ({' + '.join(transcripts.transcript_goal_sets(env))}, 64 environments, "
            f"{transcripts.max_steps} steps)"
        ),
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "warmup_steps": 100,
        "grad_clip": 1.0,
        "optimizer": "Adam",
    }
    if not transcripts.unsuffixed:  # an unsuffixed recipe stays as it was, so its version name does too
        recipe["environment"] = env.name
    text = transcripts.text(env)
    if text:  # the transcripts' text (BabyAI-Text: GLAM's or the former wording)
        recipe["text"] = text
    if data == "hindsight":  # the "random" recipe stays as it was, so its version name does too
        recipe["data"] += f", {HINDSIGHT_SHARE:g} of them with hindsight goals (reported later in the episode)"
    elif data != "random":
        raise ValueError(f"unknown pretraining data {data!r}; choose one of {DATA}")
    return recipe


def offline_name(
    kind: ModelKind = "t5", data: str | None = "random", environment: TextEnvironment | None = None
) -> str:
    """The offline model name of a random-init model (``data=None``) or of a pretraining stream:
    ``tiny-t5``, ``tiny-t5-pretrained``, ``tiny-t5-hindsight`` (Playground-Text),
    ``tiny-t5-pretrained-babyai`` (another environment's transcripts)."""
    if data is None:
        return f"tiny-{kind}"
    env = vocabulary_environment(environment)
    suffix = "" if recipe_of(env).unsuffixed else f"-{env.name}"
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
