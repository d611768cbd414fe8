"""The offline default model: a tiny random-initialised LLM with a word tokenizer of the environment.

No model weights can be downloaded in tests, examples or air-gapped clusters, so the default model
of this package is built locally: a word-level tokenizer over an environment's vocabulary (made
with the ``tokenizers`` library, wrapped as a ``PreTrainedTokenizerFast``) and a small T5 (or a
small Llama-style decoder) initialised from a fixed seed. It is written with ``save_pretrained``
and read back through the very same ``from_pretrained`` path as any Hugging Face model, so the
code that runs on ``google/flan-t5-base`` is the code the tests exercise.

Command line::

    python -m torchrl_glam.offline.tiny --out DIR [--kind t5|llama] [--seed 0]

From Python, ``resolve("offline:tiny-t5", environment).build()``
(:mod:`torchrl_glam.offline.resolve`) returns the shipped tiny T5 (package data, see
:mod:`torchrl_glam.offline.shipped`) or builds the model once into a cache directory
(``$TORCHRL_GLAM_CACHE`` or ``~/.cache/torchrl_glam``, named by its recipe version,
:func:`build_tiny_into_cache`) and returns its path. Concurrent callers (test workers, the ranks
of a data-parallel run, Slurm array jobs on a shared file system) build one at a time: the first
takes a lock and builds, the others wait with a message and then load its build.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

from torchrl_glam.envs import TextEnvironment
from torchrl_glam.offline.cache import build_into_cache
from torchrl_glam.offline.models import (
    OUTPUT_INIT_STD,
    ModelKind,
    tiny_config_fields,
    tiny_model_recipe,
)
from torchrl_glam.offline.recipes import vocabulary_environment
from torchrl_glam.offline.shipped import recipe_version, ship

PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, BOS_TOKEN = "<pad>", "</s>", "<unk>", "<s>"


def build_word_tokenizer(kind: ModelKind = "t5", environment: TextEnvironment | None = None):
    """A word-level ``PreTrainedTokenizerFast`` over every word of ``environment`` (a
    :class:`~torchrl_glam.envs.protocol.TextEnvironment`; ``None``: Playground-Text).

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

    specials = [PAD_TOKEN, EOS_TOKEN, UNK_TOKEN] + ([BOS_TOKEN] if kind == "llama" else [])
    vocab = {
        token: index for index, token in enumerate(specials + vocabulary_environment(environment).vocabulary_words())
    }
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    # Split on whitespace, then isolate every non-word character (":" and ","). Not the
    # ``Punctuation`` pre-tokenizer: it also splits "_", which would break "living_thing".
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(r"[^\w]"), behavior="isolated")]
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    if kind == "t5":
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A {EOS_TOKEN}",
            pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}",
            special_tokens=[(EOS_TOKEN, vocab[EOS_TOKEN])],
        )
    else:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS_TOKEN} $A",
            pair=f"{BOS_TOKEN} $A $B",
            special_tokens=[(BOS_TOKEN, vocab[BOS_TOKEN])],
        )
    extra = {"bos_token": BOS_TOKEN} if kind == "llama" else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        padding_side="right",
        **extra,
    )


def tiny_model_config(kind: ModelKind, vocab_size: int, **overrides):
    """The config of the tiny model: d_model 64, 2 layers, no dropout (deterministic scores).

    ``overrides`` replace any field, e.g. ``d_model=512, num_layers=6, num_heads=8, d_ff=2048``
    for a t5-small-shaped T5 (the benchmark uses this).
    """
    from transformers import LlamaConfig, T5Config

    fields = tiny_config_fields(kind, vocab_size, **overrides)
    return T5Config(**fields) if kind == "t5" else LlamaConfig(**fields)


def build_tiny_model(
    out: str | os.PathLike,
    kind: ModelKind = "t5",
    seed: int = 0,
    environment: TextEnvironment | None = None,
    **overrides,
) -> Path:
    """Build the tiny model and its tokenizer into ``out`` (created) and return ``out``.

    Deterministic: the same seed gives the same weights. ``environment``: the
    :class:`~torchrl_glam.envs.protocol.TextEnvironment` whose vocabulary the tokenizer holds
    (``None``: Playground-Text). ``overrides`` go to :func:`tiny_model_config`.
    """
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    out = Path(out)
    tokenizer = build_word_tokenizer(kind, environment)
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


def build_tiny_into_cache(final: Path, kind: ModelKind, environment: TextEnvironment) -> Path:
    """Builds the default tiny model (seed 0) of ``environment``'s vocabulary into the cache folder
    ``final`` (once: see :func:`~torchrl_glam.offline.cache.build_into_cache`) and returns it;
    :meth:`~torchrl_glam.offline.resolve.ResolvedModel.build` calls it where the model is missing."""
    return build_into_cache(
        final, lambda directory: build_tiny_model(directory, kind=kind, seed=0, environment=environment)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory to write the model and tokenizer to")
    parser.add_argument("--kind", choices=["t5", "llama"], default="t5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ship",
        action="store_true",
        help="write the seed-0 model into the package folder with its manifest entry "
        "(maintainers; commit torchrl_glam/offline/weights/ afterwards)",
    )
    args = parser.parse_args(argv)
    if args.ship:
        if args.seed != 0 or args.out is not None:
            parser.error("--ship writes the default model (seed 0) into the package; no --seed or --out")
        with tempfile.TemporaryDirectory() as directory:
            built = build_tiny_model(directory, kind=args.kind, seed=0)
            recipe = tiny_model_recipe(args.kind)
            path = ship(
                f"tiny-{args.kind}",
                built,
                {
                    "recipe": recipe,
                    "recipe_version": recipe_version(recipe),
                    "seed": 0,
                    "command": f"python -m torchrl_glam.offline.tiny --ship --kind {args.kind}",
                    "torch_threads": torch.get_num_threads(),
                },
            )
        print(f"shipped the tiny {args.kind} model in {path} (commit torchrl_glam/offline/weights/)")
        return
    if args.out is None:
        parser.error("--out DIR is required (or --ship)")
    path = build_tiny_model(args.out, kind=args.kind, seed=args.seed)
    print(f"wrote a tiny {args.kind} model to {path}; load it with LLMConfig(name_or_path={str(path)!r})")


if __name__ == "__main__":
    main()
