"""Names that differ between the transformers releases the scorer supports."""

from __future__ import annotations

import functools


@functools.cache
def cache_argument() -> str:
    """The name of a model's KV-cache argument and output in the installed transformers: it renamed
    ``past_key_values`` to ``cache`` and warns that the old name goes in 5.40; older releases know
    only the old one. The output dataclasses carry the name a release uses. (transformers is
    imported here, not with this module, as everywhere in the package: ``import torchrl_glam``
    stays light.)"""
    from transformers.modeling_outputs import Seq2SeqLMOutput

    return "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


def activation_checkpointing(model) -> bool:
    # transformers 5 renamed ``is_gradient_checkpointing`` (deprecated) to ``is_activation_checkpointing``.
    flag = getattr(model, "is_activation_checkpointing", None)
    if flag is None:
        flag = getattr(model, "is_gradient_checkpointing", False)
    return bool(flag)
