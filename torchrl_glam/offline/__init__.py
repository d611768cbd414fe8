"""The offline-model pipeline: building the tiny models that need no download, and pretraining them
on transcripts of random play in an environment. ``load_llm`` only loads
(:mod:`~torchrl_glam.modules.offline_models` finds a model, shipped or built); this builds.

Command line: ``python -m torchrl_glam.offline tiny-llama-pretrained [--env babyai]`` builds an
offline model into the cache (a training run that names one builds it itself);
``python -m torchrl_glam.offline.tiny`` and ``python -m torchrl_glam.offline.pretraining`` build one
into a folder of your choice, or ship it with the package (maintainers).
"""

from __future__ import annotations

from pathlib import Path

from torchrl_glam.envs import DEFAULT_ENVIRONMENT
from torchrl_glam.modules.offline_models import OFFLINE_MODELS, OFFLINE_PREFIX, parse_offline_name
from torchrl_glam.offline.pretraining import default_pretrained_model_path, pretrain
from torchrl_glam.offline.tiny import build_tiny_model, build_word_tokenizer, default_tiny_model_path
from torchrl_glam.offline.transcripts import HindsightTranscripts, RandomPlayTranscripts


def build_offline_model(name: str | None, environment=DEFAULT_ENVIRONMENT) -> Path:
    """The directory of the offline model ``name`` (``offline:<one of OFFLINE_MODELS>``; ``None``:
    ``offline:tiny-t5``) in the vocabulary of ``environment``: shipped, already built, or built now
    into the cache (once: concurrent callers wait for one build)."""
    kind, data, environment = parse_offline_name(name or f"{OFFLINE_PREFIX}tiny-t5", environment)
    if data is None:
        return default_tiny_model_path(kind, environment)
    return default_pretrained_model_path(kind, data, environment)


__all__ = [
    "OFFLINE_MODELS",
    "HindsightTranscripts",
    "RandomPlayTranscripts",
    "build_offline_model",
    "build_tiny_model",
    "build_word_tokenizer",
    "default_pretrained_model_path",
    "default_tiny_model_path",
    "pretrain",
]
