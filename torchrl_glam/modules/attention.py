"""Attention for scoring many candidates of one prompt with a T5-family encoder-decoder.

Scoring A candidate actions of B prompts runs the decoder on B*A short sequences. Their
cross-attention reads the prompt's encoder states, the same for the A candidates of a prompt.
transformers' attention functions need one key/value row per query row, so the prompt's cached
cross-attention keys/values would have to be copied A times (``batch_repeat_interleave``), and
their gradients summed back in the backward pass: on the CPU preset that copy, its backward and
the attention over the copies were ~30% of an update (``python -m torchrl_glam.benchmarks.scoring``).
transformers has no attention over a batch of queries that share keys, so this module provides
one, registered through transformers' public ``AttentionInterface``:

* when the keys have fewer rows than the queries (B against B*A: the scorer passes the
  un-repeated cross-attention cache), the A query rows of a prompt (its candidates, or the
  prefixes of its candidates that the scorer's prefix tree runs at one depth) are folded into one
  query sequence of length A*La and attend to the prompt's keys once. This is exact: T5's
  cross-attention has no position bias and its mask depends only on the key (padding), so every
  row's query sees exactly the keys and mask it would see in its own row;
* otherwise (encoder self-attention, decoder self-attention) it is T5's eager attention with the
  position bias and the mask added in one pass before the score product (``baddbmm``) instead of
  three passes after it; on the CPU this beat both the eager and the SDPA implementations at these
  sizes (see ``benchmarks/scoring.py``).

The mask function registered with it is transformers' eager (additive float) mask.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

SHARED_PROMPT_ATTENTION = "glam_shared_prompt"
#: model types whose decoder cross-attention has no position bias and reads its keys/values from
#: the cache unchanged, so the un-repeated cache is valid (tests check shared == naive scoring)
SHARED_PROMPT_MODEL_TYPES = ("t5", "mt5")


def shared_prompt_attention(
    module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
    scaling: float | None = None, dropout: float = 0.0, position_bias: Tensor | None = None, **kwargs,
) -> tuple[Tensor, None]:
    """transformers' attention-function signature: query [b, h, Lq, d], key/value [b', h, Lk, d]
    with b = b' * A; returns the output [b, Lq, h, d] (and no weights)."""
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rows, heads, query_length, dim = query.shape
    prompts = key.shape[0]
    if prompts != rows:
        if rows % prompts or getattr(module, "has_relative_attention_bias", False):
            raise ValueError(f"keys of {prompts} prompts for {rows} query rows: the queries of a prompt's "
                             "candidates must be consecutive rows, and the attention must have no position bias")
        candidates = rows // prompts
        # [B*A, h, Lq, d] -> [B, h, A*Lq, d]: a prompt's candidates as one query sequence
        query = query.reshape(prompts, candidates, heads, query_length, dim).transpose(1, 2)
        query = query.reshape(prompts, heads, candidates * query_length, dim)
        bias = None if attention_mask is None else attention_mask[:, :, :1]  # the same for every query
        output = _attend(module, query, key, value, bias, scaling, dropout)
        output = output.reshape(prompts, heads, candidates, query_length, dim)
        return output.permute(0, 2, 3, 1, 4).reshape(rows, query_length, heads, dim), None
    bias = position_bias
    if attention_mask is not None:
        bias = attention_mask if bias is None else bias + attention_mask
    return _attend(module, query, key, value, bias, scaling, dropout).transpose(1, 2).contiguous(), None


def _attend(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None,
            scaling: float, dropout: float) -> Tensor:
    """softmax(scaling * q k^T + bias) v over [b, h, Lq, d] x [b, h, Lk, d]."""
    batch, heads, query_length, dim = query.shape
    key_length = key.shape[-2]
    q = query.reshape(batch * heads, query_length, dim)
    k_t = key.reshape(batch * heads, key_length, dim).transpose(1, 2)
    if bias is None:
        scores = torch.bmm(q, k_t)
        if scaling != 1.0:
            scores = scores * scaling
    else:
        # heads folded into the batch; a bias that is the same for every query stays one row (baddbmm broadcasts it)
        bias = bias.expand(batch, heads, bias.shape[2], key_length).reshape(batch * heads, bias.shape[2], key_length)
        scores = torch.baddbmm(bias, q, k_t, alpha=scaling)
    weights = scores.softmax(-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.bmm(weights, value.reshape(batch * heads, key_length, dim))
    return output.reshape(batch, heads, query_length, dim)


def use_shared_prompt_attention(model: nn.Module) -> bool:
    """Switches ``model`` (a transformers model, possibly wrapped by peft) to
    :func:`shared_prompt_attention` if its type supports it; returns whether it did. Its outputs are
    those of eager attention for any input (tests compare)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in SHARED_PROMPT_MODEL_TYPES:
        return False
    AttentionInterface.register(SHARED_PROMPT_ATTENTION, shared_prompt_attention)
    AttentionMaskInterface.register(SHARED_PROMPT_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    model.set_attn_implementation(SHARED_PROMPT_ATTENTION)
    return True
