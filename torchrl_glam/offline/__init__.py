"""The offline models, in one place: their names and recipes (:mod:`~torchrl_glam.offline.models`),
the weights shipped with the package and their manifest (:mod:`~torchrl_glam.offline.shipped`,
``offline/weights/``), the cache they are built into, and the builders: the tiny models that need
no download (:mod:`~torchrl_glam.offline.tiny`) and their pretraining on transcripts of random play
in an environment (:mod:`~torchrl_glam.offline.pretraining`). ``load_llm`` only loads
(:func:`~torchrl_glam.offline.resolve.resolve` reads a model name once, for an environment, and
finds the model, shipped or built); the builders build, when asked (``ResolvedModel.build``, the
training runs before they start, the command line below). What each environment's models are
pretrained on is the offline room's own table (:mod:`~torchrl_glam.offline.recipes`).

Command line: ``python -m torchrl_glam.offline tiny-llama-pretrained [--env babyai]`` builds an
offline model into the cache (a training run builds the one it names before it starts);
``python -m torchrl_glam.offline.tiny`` and ``python -m torchrl_glam.offline.pretraining`` build one
into a folder of your choice, or ship it with the package (maintainers).
"""

from __future__ import annotations

import lazy_loader

from torchrl_glam.offline.models import OFFLINE_MODELS
from torchrl_glam.offline.recipes import TranscriptRecipe, recipe_of, register_recipe
from torchrl_glam.offline.resolve import ResolvedModel, resolve

# the names, recipes, resolution and shipped weights import without torch (the config and
# ``modules/loading.py`` read them); the builders, which import torch and the data room, load when used
__getattr__, __dir__, _lazy = lazy_loader.attach(
    __name__,
    submod_attrs={
        "pretraining": ["pretrain"],
        "tiny": ["build_tiny_model", "build_word_tokenizer"],
        "transcripts": ["HindsightTranscripts", "RandomPlayTranscripts"],
    },
)

__all__ = ["OFFLINE_MODELS", "ResolvedModel", "TranscriptRecipe", "recipe_of", "register_recipe", "resolve", *_lazy]
