"""The offline models, in one place: their names and recipes (:mod:`~torchrl_glam.offline.models`),
the weights shipped with the package and their manifest (:mod:`~torchrl_glam.offline.shipped`,
``offline/weights/``), the cache they are built into, and the builders: the tiny models that need
no download (:mod:`~torchrl_glam.offline.tiny`) and their pretraining on transcripts of random play
in an environment (:mod:`~torchrl_glam.offline.pretraining`). ``load_llm`` only loads
(:func:`~torchrl_glam.offline.models.offline_model_path` finds a model, shipped or built); the
builders build.

Command line: ``python -m torchrl_glam.offline tiny-llama-pretrained [--env babyai]`` builds an
offline model into the cache (a training run that names one builds it itself);
``python -m torchrl_glam.offline.tiny`` and ``python -m torchrl_glam.offline.pretraining`` build one
into a folder of your choice, or ship it with the package (maintainers).
"""

from __future__ import annotations

from pathlib import Path

import lazy_loader

from torchrl_glam.envs import DEFAULT_ENVIRONMENT
from torchrl_glam.offline.models import OFFLINE_MODELS, OFFLINE_PREFIX, parse_offline_name

# the names, recipes and shipped weights import without torch (``modules/loading.py`` reads them);
# the builders, which import torch and the data room, load when used
__getattr__, __dir__, _lazy = lazy_loader.attach(
    __name__,
    submod_attrs={
        "pretraining": ["default_pretrained_model_path", "pretrain"],
        "tiny": ["build_tiny_model", "build_word_tokenizer", "default_tiny_model_path"],
        "transcripts": ["HindsightTranscripts", "RandomPlayTranscripts"],
    },
)


def build_offline_model(name: str | None, environment=DEFAULT_ENVIRONMENT) -> Path:
    """The directory of the offline model ``name`` (``offline:<one of OFFLINE_MODELS>``; ``None``:
    ``offline:tiny-t5``) in the vocabulary of ``environment``: shipped, already built, or built now
    into the cache (once: concurrent callers wait for one build)."""
    from torchrl_glam.offline.pretraining import default_pretrained_model_path
    from torchrl_glam.offline.tiny import default_tiny_model_path

    kind, data, environment = parse_offline_name(name or f"{OFFLINE_PREFIX}tiny-t5", environment)
    if data is None:
        return default_tiny_model_path(kind, environment)
    return default_pretrained_model_path(kind, data, environment)


__all__ = ["OFFLINE_MODELS", "build_offline_model", *_lazy]
