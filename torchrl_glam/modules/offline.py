"""The offline default model: a tiny random-initialised LLM with a Playground-Text word tokenizer.

No model weights can be downloaded in tests, examples or air-gapped clusters, so the default model
of this package is built locally: a word-level tokenizer over the Playground-Text vocabulary (made
with the ``tokenizers`` library, wrapped as a ``PreTrainedTokenizerFast``) and a small T5 (or a
small Llama-style decoder) initialised from a fixed seed. It is written with ``save_pretrained``
and read back through the very same ``from_pretrained`` path as any Hugging Face model, so the
code that runs on ``google/flan-t5-base`` is the code the tests exercise.

Command line::

    python -m torchrl_glam.modules.offline --out DIR [--kind t5|llama] [--seed 0]

From Python, :func:`default_tiny_model_path` builds the model once into a cache directory
(``$TORCHRL_GLAM_CACHE`` or ``~/.cache/torchrl_glam``) and returns its path; concurrent callers
(several test workers, several cluster jobs) each build into a private temporary directory and
the first one to rename it into place wins.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

import torch

ModelKind = Literal["t5", "llama"]

PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, BOS_TOKEN = "<pad>", "</s>", "<unk>", "<s>"
#: Bump when the recipe below changes, so stale cached builds are not reused.
RECIPE_VERSION = 1
#: Standard deviation of the output projection. A default T5 init gives token logits with a std of
#: ~11 (peaked, far from uniform); the initial policy of SAC-GLAM should be close to uniform over the
#: candidates, as a pre-trained LLM that knows nothing of the task would be. Only the output head is
#: shrunk (rather than the whole network through ``initializer_factor``, which also scales the final
#: layer norm) so that the hidden states the critic reads keep their usual unit scale.
OUTPUT_INIT_STD = 0.01


def build_word_tokenizer(kind: ModelKind = "t5"):
    """A word-level ``PreTrainedTokenizerFast`` over every Playground-Text word.

    Words split on whitespace and punctuation ("see:" -> "see", ":"). T5 appends ``</s>`` to an
    encoded text like the real T5 tokenizer; the decoder-only kind prepends ``<s>`` like Llama.
    """
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    from torchrl_glam.envs.vocabulary import vocabulary_words

    specials = [PAD_TOKEN, EOS_TOKEN, UNK_TOKEN] + ([BOS_TOKEN] if kind == "llama" else [])
    vocab = {token: index for index, token in enumerate(specials + vocabulary_words())}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    # Split on whitespace, then isolate every non-word character (":" and ","). Not the
    # ``Punctuation`` pre-tokenizer: it also splits "_", which would break "living_thing".
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(r"[^\w]"), behavior="isolated")]
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    if kind == "t5":
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A {EOS_TOKEN}", pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}",
            special_tokens=[(EOS_TOKEN, vocab[EOS_TOKEN])],
        )
    else:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B",
            special_tokens=[(BOS_TOKEN, vocab[BOS_TOKEN])],
        )
    extra = {"bos_token": BOS_TOKEN} if kind == "llama" else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN, unk_token=UNK_TOKEN,
        padding_side="right", **extra,
    )


def tiny_model_config(kind: ModelKind, vocab_size: int, **overrides):
    """The config of the tiny model: d_model 64, 2 layers, no dropout (deterministic scores).

    ``overrides`` replace any field, e.g. ``d_model=512, num_layers=6, num_heads=8, d_ff=2048``
    for a t5-small-shaped T5 (the benchmark uses this).
    """
    from transformers import LlamaConfig, T5Config

    if kind == "t5":
        fields = dict(
            vocab_size=vocab_size, d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2,
            num_decoder_layers=2, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
            dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        )
        fields.update(overrides)
        if "num_layers" in overrides and "num_decoder_layers" not in overrides:
            fields["num_decoder_layers"] = overrides["num_layers"]
        return T5Config(**fields)
    if kind == "llama":
        fields = dict(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            tie_word_embeddings=False, attention_dropout=0.0, pad_token_id=0, eos_token_id=1,
            bos_token_id=3,
        )
        fields.update(overrides)
        return LlamaConfig(**fields)
    raise ValueError(f"unknown tiny model kind {kind!r}: expected 't5' or 'llama'")


def build_tiny_model(out: str | os.PathLike, kind: ModelKind = "t5", seed: int = 0, **overrides) -> Path:
    """Build the tiny model and its tokenizer into ``out`` (created) and return ``out``.

    Deterministic: the same seed gives the same weights. ``overrides`` go to
    :func:`tiny_model_config`.
    """
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    out = Path(out)
    tokenizer = build_word_tokenizer(kind)
    config = tiny_model_config(kind, vocab_size=len(tokenizer), **overrides)
    auto_class = AutoModelForSeq2SeqLM if kind == "t5" else AutoModelForCausalLM
    # A private generator state: building the model must not disturb the caller's RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = auto_class.from_config(config)
        with torch.no_grad():
            model.get_output_embeddings().weight.normal_(0.0, OUTPUT_INIT_STD)
    save_model_and_tokenizer(model, tokenizer, out)
    return out


def save_model_and_tokenizer(model, tokenizer, out: str | os.PathLike) -> Path:
    """``save_pretrained`` of both into ``out``, whatever this process's distributed rank.

    Inside an initialised process group, transformers' ``save_pretrained`` writes the config and
    weights on rank 0 only. The offline models are built by whichever rank gets there first (each
    rank of a data-parallel run resolves the model itself), so a rank-1 build would leave a
    directory holding the tokenizer alone, and renaming it into the cache would break every later
    load. The model here is this process's own private copy, so it always saves.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.should_save_on_this_rank = lambda is_main_process: True  # see the docstring
    try:
        model.save_pretrained(out)
    finally:
        del model.should_save_on_this_rank
    tokenizer.save_pretrained(out)
    if not (out / "config.json").exists() or not any(out.glob("*.safetensors")):
        raise RuntimeError(f"saving the model to {out} wrote no config or weights: {sorted(os.listdir(out))}")
    return out


def cache_root() -> Path:
    """Where built models are cached: ``$TORCHRL_GLAM_CACHE`` or ``~/.cache/torchrl_glam``."""
    return Path(os.environ.get("TORCHRL_GLAM_CACHE", Path.home() / ".cache" / "torchrl_glam"))


def build_into_cache(final: Path, build) -> Path:
    """``final`` once it holds a model, calling ``build(directory)`` to make it if needed.

    Safe under concurrent builds (several test workers, the ranks of a data-parallel run, array
    jobs): each caller builds into its own temporary directory next to ``final`` and renames it
    into place; a rename that loses the race is discarded. A ``final`` left without a config (a
    build interrupted by an older version) is replaced.
    """
    if (final / "config.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(staging)
        try:
            os.rename(staging, final)  # atomic on one filesystem
        except OSError:
            if (final / "config.json").exists():  # lost the race to a complete build
                return final
            shutil.rmtree(final, ignore_errors=True)  # a broken leftover: replace it
            os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def default_tiny_model_path(kind: ModelKind = "t5") -> Path:
    """Path of the default tiny model, built once (seed 0) into :func:`cache_root`."""
    final = cache_root() / f"tiny-{kind}-v{RECIPE_VERSION}"
    return build_into_cache(final, lambda directory: build_tiny_model(directory, kind=kind, seed=0))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory to write the model and tokenizer to")
    parser.add_argument("--kind", choices=["t5", "llama"], default="t5")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = build_tiny_model(args.out, kind=args.kind, seed=args.seed)
    print(f"wrote a tiny {args.kind} model to {path}; load it with "
          f"LLMConfig(name_or_path={str(path)!r})")


if __name__ == "__main__":
    main()
