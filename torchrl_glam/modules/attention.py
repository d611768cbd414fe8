"""Attention for scoring the candidates of a prompt as a prefix tree with a T5-family encoder-decoder.

Scoring A candidate actions of B prompts runs the decoder on their tokens. The scorer runs each
distinct prefix of a prompt's candidates once, as one token of a single decoder sequence per prompt:
[start, the tree's nodes level by level] (``Seq2SeqScoring.tree``, ``modules/seq2seq_scoring.py``). A 4D
decoder mask, which
transformers takes as given, lets each node attend to its ancestors only. What the mask cannot
express is T5's self-attention position bias: transformers computes it from the tokens' places in
the sequence, while a node must see its ancestors at the relative positions they have in its own
prefix (its depth minus theirs). transformers has no way to pass another bias in, so this module
registers an attention function, through transformers' public ``AttentionInterface``, which:

* in the decoder's self-attention (``module.is_causal``), when the call carries a
  ``glam_tree_position_bias`` keyword (transformers hands a model call's extra keywords down to its
  attention functions), uses that bias, [1, h, S, S] from the decoder's own bias table, instead of
  the one computed from the sequence's places;
* everywhere else is T5's eager attention, in the same order of operations (so the same numbers)
  with the position bias and the mask added in place to the score product (``attend``); on the
  CPU this beat transformers' eager and SDPA implementations at these sizes.

The mask function registered with it is transformers' eager (additive float) mask.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

TREE_ATTENTION = "glam_tree"
#: the keyword a model call passes to give the decoder's self-attention a position bias
TREE_POSITION_BIAS = "glam_tree_position_bias"
#: model types with T5's attention: a relative position bias shared by the layers and added to the
#: scores, which the tree's bias can replace (tests check tree == naive scoring)
TREE_ATTENTION_MODEL_TYPES = ("t5", "mt5")
#: rows of attention scores shorter than this are padded before the softmax (see ``attend``)
SOFTMAX_MIN_VECTOR_ROW = 16


def tree_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    position_bias: Tensor | None = None,
    glam_tree_position_bias: Tensor | None = None,
    **kwargs,
) -> tuple[Tensor, None]:
    """transformers' attention-function signature: query [b, h, Lq, d], key/value [b, h, Lk, d];
    returns the output [b, Lq, h, d] (and no weights)."""
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    bias = position_bias
    if glam_tree_position_bias is not None and getattr(module, "is_causal", False):
        bias = glam_tree_position_bias
    return attend(module, query, key, value, bias, attention_mask, scaling, dropout).transpose(1, 2).contiguous(), None


def attend(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    bias: Tensor | None,
    mask: Tensor | None,
    scaling: float,
    dropout: float,
) -> Tensor:
    """softmax(scaling * q k^T + bias + mask) v over [b, h, Lq, d] x [b, h, Lk, d]."""
    scores = torch.matmul(query, key.transpose(2, 3))
    if scaling != 1.0:
        scores = scores * scaling
    # The position bias [1, h, Lq, Lk] and the mask [b, 1, Lq, Lk] are added in place to the
    # product, a fresh tensor that no backward needs: one pass each over the scores. Adding them to
    # each other first builds a [b, h, Lq, Lk] tensor in the bias's layout (T5's is heads-last),
    # which folding the heads then copies, and which baddbmm copies once more.
    for term in (bias, mask):
        if term is not None:
            scores.add_(term)
    key_length = key.shape[-2]
    if key_length < SOFTMAX_MIN_VECTOR_ROW and scores.device.type == "cpu":
        # PyTorch's CPU softmax over rows shorter than 16 takes a scalar path, ~9x slower than over
        # rows of 16 (~220 ns against ~16 ns a row of 14 on an AVX2 core, 2.13). The tree's
        # self-attention rows are that short (the decoder sequence of a prompt has ~10-14 tokens):
        # keys padded with -inf weigh exactly 0.
        padded = nn.functional.pad(scores, (0, SOFTMAX_MIN_VECTOR_ROW - key_length), value=float("-inf"))
        weights = padded.softmax(-1)[..., :key_length]
    else:
        weights = scores.softmax(-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value)


def routes_through_attention_interface(model_type: str) -> bool:
    """Whether transformers' modeling code for ``model_type`` runs its attention through the
    registered attention functions (``ALL_ATTENTION_FUNCTIONS``). T5 does since transformers#47014
    (2026); before, it ran its own eager attention, which would ignore the tree's position bias and
    score every candidate wrongly without an error, so the scorer must not use the tree there."""
    import importlib

    try:
        modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    except ImportError:
        return False
    return hasattr(modeling, "ALL_ATTENTION_FUNCTIONS")


def use_tree_attention(model: nn.Module) -> bool:
    """Switches ``model`` (a transformers model, possibly wrapped by peft) to
    :func:`tree_attention` if its type supports it; returns whether it did. Without the tree's
    keyword its outputs are those of eager attention for any input (tests compare)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in TREE_ATTENTION_MODEL_TYPES or not routes_through_attention_interface(model_type):
        return False
    AttentionInterface.register(TREE_ATTENTION, tree_attention)
    AttentionMaskInterface.register(TREE_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    model.set_attn_implementation(TREE_ATTENTION)
    return True
