"""Decoder-only scoring paths of :class:`~torchrl_glam.modules.scoring.LLMScorer`.

* :meth:`CausalScoring.tree` (the default for ``LEAN_CAUSAL_MODEL_TYPES``): a prompt and the prefix
  tree of its candidates (``modules/prefix_tree.py``) run as one sequence, [left-padded prompt, the
  tree's nodes level by level], in one forward: a 4D mask lets each node see the prompt and its own
  ancestors only, and its position id is the one its token has in prompt + its prefix (prompt
  length - 1 + depth), so every node computes what the last token of its own prefix would. The
  prompt runs once and no cache is repeated per candidate; it needs no cache at all, so it also
  runs with activation checkpointing. Only the last hidden state is kept and the LM head is applied
  where a candidate token is predicted (``modules/token_log_probs.py``). Such a model's MLPs and
  norms save less for backward (``modules/swiglu.py``, ``modules/rms_norm.py``), so do its LoRA
  adapters in half precision (``modules/adapter_precision.py``), and, on the CPU, its grouped
  key/value heads stay grouped (:func:`gqa_sdpa_attention`). The last layer computes only the rows
  that are read, from the prompt's last token on (:func:`rows_read_from`): the prompt's other rows
  only serve as keys and values there.
* :meth:`CausalScoring.pairs`: every (prompt, candidate) pair as its own sequence (``naive``).
* :meth:`CausalScoring.repeated_cache`: other models (whose attention may ignore a 4D mask, or whose
  logits are not the plain head of the last state): the left-padded prompts run once with a KV
  cache (position ids count real tokens only), the cache is repeated over the candidates, and the
  candidates run in one batch, with the whole vocabulary's logits.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn

from torchrl_glam.modules.adapter_precision import adapter_autocast_dtype, adapters_in_model_dtype
from torchrl_glam.modules.prefix_tree import prefix_tree, tree_layout
from torchrl_glam.modules.rms_norm import use_recomputed_rms_norms
from torchrl_glam.modules.swiglu import ROWS_FROM, use_swiglu
from torchrl_glam.modules.token_log_probs import (
    LEAN_CAUSAL_MODEL_TYPES,
    LMHead,
    PerToken,
    at,
    from_prefix_and_continuation,
    log_probs_at,
    scatter_valid,
    token_logp,
    valid_tokens,
)
from torchrl_glam.modules.tokenisation import Tokenised
from torchrl_glam.modules.transformers_compat import activation_checkpointing, cache_argument

#: the attention implementation a lean model gets on the CPU when it has fewer key/value heads than
#: query heads (:func:`gqa_sdpa_attention`)
GQA_SDPA_ATTENTION = "glam_gqa_sdpa"
#: attention implementations that apply a given 4D additive mask (flash attention does not)
MASKED_ATTENTION = ("eager", "sdpa", GQA_SDPA_ATTENTION)


def gqa_sdpa_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[Tensor, None]:
    """transformers' SDPA attention, with grouped key/value heads kept grouped on the CPU.

    Given a mask, transformers repeats the key/value heads to the query heads' number before SDPA
    (its kernels on CUDA need that), and autograd saves the repeated copies. The CPU kernel takes
    ``enable_gqa`` with a mask: SmolLM2's attention (9 query, 3 key/value heads) then saves 2/3 of
    the bytes and runs forward + backward ~25% faster, with the same outputs (tests compare). Without
    gradient, the prefix tree's additive mask takes :func:`_grouped_attention` instead. Under
    :func:`rows_read_from` only the queries from its column on are computed (the others are 0)."""
    start = getattr(module, ROWS_FROM, 0)
    if start and attention_mask is not None:
        out, _ = _gqa_sdpa_attention(
            module, query[:, :, start:], key, value, attention_mask[:, :, start:], dropout, scaling, is_causal, **kwargs
        )
        return nn.functional.pad(out, (0, 0, 0, 0, start, 0)), None
    return _gqa_sdpa_attention(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)


def _gqa_sdpa_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float,
    scaling: float | None,
    is_causal: bool | None,
    **kwargs,
) -> tuple[Tensor, None]:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    groups = getattr(module, "num_key_value_groups", 1)
    if (
        query.device.type != "cpu"
        or groups == 1
        or kwargs.get("output_attentions")
        or kwargs.get("softcap") is not None
    ):
        return ALL_ATTENTION_FUNCTIONS["sdpa"](
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    if (
        not torch.is_grad_enabled()
        and dropout == 0.0
        and attention_mask is not None
        and attention_mask.is_floating_point()
        and attention_mask.shape[1] == 1
    ):  # the prefix tree's mask
        return _grouped_attention(query, key, value, attention_mask, scaling), None
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        enable_gqa=True,
        is_causal=bool(query.shape[2] > 1 and attention_mask is None and causal),
    )
    return out.transpose(1, 2).contiguous(), None


def _grouped_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor, scaling: float | None) -> Tensor:
    """softmax(q k^T * scaling + mask) v with each key/value head shared by its group of query heads,
    as [b, Lq, h, d]. Without gradient on the CPU this beats SDPA's kernel at the prefix tree's sizes
    (tiny decoder [32, 4, 61, 16]: 2.2 -> 1.1 ms; SmolLM2 [32, 9, 77, 64]: 12.6 -> 11.3 ms); with
    gradient it would save the [b, h, Lq, Lk] weights, so SDPA keeps that case."""
    batch, heads, length, dim = query.shape
    kv_heads, key_length = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    # query head h uses key/value head h // groups (transformers' repeat_kv): fold each group's
    # queries into one [groups * Lq] block per key/value head
    scores = torch.matmul(query.reshape(batch, kv_heads, groups * length, dim), key.transpose(2, 3))
    scores = scores.mul_(dim**-0.5 if scaling is None else scaling).view(batch, kv_heads, groups, length, key_length)
    scores.add_(mask[:, :, None, :, :key_length])  # [b, 1, Lq, Lk] over every head
    # in float32 whatever the model's dtype, as transformers' eager attention
    weights = scores.view(batch, kv_heads, groups * length, key_length).softmax(-1, dtype=torch.float32)
    return torch.matmul(weights.to(value.dtype), value).view(batch, heads, length, dim).transpose(1, 2).contiguous()


@contextlib.contextmanager
def rows_read_from(layer: nn.Module, start: int):
    """Within the block, ``layer`` (a decoder layer) computes its attention's queries and its MLP's
    rows from column ``start`` on only, where its attention is :func:`gqa_sdpa_attention` and its MLP
    :class:`SwiGLU`; the earlier rows' outputs are 0, for a caller that reads none of them."""
    modules = [
        module for module in (getattr(layer, "self_attn", None), getattr(layer, "mlp", None)) if module is not None
    ]
    for module in modules:
        setattr(module, ROWS_FROM, start)
    try:
        yield
    finally:
        for module in modules:
            setattr(module, ROWS_FROM, 0)


def use_gqa_sdpa_attention(model: nn.Module) -> bool:
    """Switches ``model`` from transformers' SDPA to :func:`gqa_sdpa_attention` if it groups its
    key/value heads; returns whether it did (the same numbers: only the CPU's saved bytes change)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    config = model.config
    grouped = getattr(config, "num_key_value_heads", None) not in (None, getattr(config, "num_attention_heads", None))
    if getattr(config, "_attn_implementation", None) != "sdpa" or not grouped:
        return False
    AttentionInterface.register(GQA_SDPA_ATTENTION, gqa_sdpa_attention)
    AttentionMaskInterface.register(GQA_SDPA_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.set_attn_implementation(GQA_SDPA_ATTENTION)
    return True


def supports_prefix_tree(model: nn.Module) -> bool:
    """Whether ``model`` (possibly wrapped by peft) can score a prompt's candidates as a packed prefix
    tree with the lean LM head: a model type known to take a 4D mask as given and to compute its
    logits as the plain head of the last hidden state (tests compare it with the pairs)."""
    config = model.config
    # a sliding window would be dropped with the given mask (e.g. Mistral v0.1's 4,096 tokens)
    window = getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None
    return (
        config.model_type in LEAN_CAUSAL_MODEL_TYPES
        and window is None
        and getattr(config, "_attn_implementation", None) in MASKED_ATTENTION
        and getattr(config, "final_logit_softcapping", None) is None
    )


class CausalScoring:
    """The decoder-only paths over a :class:`Tokenised` batch (see the module docstring)."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.lean = supports_prefix_tree(model)
        self.head = LMHead(model) if self.lean else None
        self.adapter_dtype = adapter_autocast_dtype(model) if self.lean else None
        if self.lean:
            use_gqa_sdpa_attention(model)
            use_swiglu(model)
            use_recomputed_rms_norms(model)

    def tree(self, batch: Tokenised) -> PerToken:
        """The prompts (left-padded) and their candidates' prefix trees in one forward."""
        prompts, prompt_width = batch.prompt_ids.shape
        tree = prefix_tree(batch.action_ids, batch.action_lengths, batch.num_candidates)
        layout = tree_layout(tree, prompts, start_id=0)  # slot 0 is the prompt's last token
        slots = layout.input_ids.shape[1]
        input_ids = torch.cat([batch.prompt_ids, layout.input_ids[:, 1:]], 1)
        prompt_lengths = batch.prompt_mask.sum(-1, keepdim=True)
        positions = torch.cat(
            [(batch.prompt_mask.cumsum(-1) - 1).clamp(min=0), prompt_lengths - 1 + layout.depth[1:]], 1
        )
        # The last layer's rows before the prompt's last token would only be discarded. Not under
        # activation checkpointing: its recomputation, after this block, must compute the same rows.
        recomputed = self.model.training and activation_checkpointing(self.model)
        with rows_read_from(self.model.get_decoder().layers[-1], 0 if recomputed else prompt_width - 1):
            hidden = self._decoder(input_ids, self._mask(batch.prompt_mask, layout.ancestors), positions)
        # slot s of prompt b sits in column prompt_width - 1 + s
        node = layout.node // slots * input_ids.shape[1] + prompt_width - 1 + layout.node % slots
        node_hidden = hidden.flatten(0, 1)[node]  # in the tree's stacked order
        valid = valid_tokens(batch.action_lengths, batch.action_ids.shape[1])
        values = log_probs_at(node_hidden, self.head, tree.predictors[valid], batch.action_ids[valid])
        return PerToken(scatter_valid(values, valid), node_hidden[tree.last], hidden[:, prompt_width - 1])

    def _mask(self, prompt_mask: Tensor, ancestors: Tensor) -> Tensor:
        """[B, 1, T, T] additive mask: a prompt token sees the real prompt tokens up to itself, a node
        the whole real prompt and its ancestors; a padding row sees itself (no empty softmax row)."""
        prompts, prompt_width = prompt_mask.shape
        slots = ancestors.shape[1]
        width = prompt_width + slots - 1
        device = prompt_mask.device
        real = prompt_mask.bool()
        allowed = torch.zeros(prompts, width, width, dtype=torch.bool, device=device)
        causal = torch.ones(prompt_width, prompt_width, dtype=torch.bool, device=device).tril()
        allowed[:, :prompt_width, :prompt_width] = causal & real[:, None, :]
        allowed[:, prompt_width:, :prompt_width] = real[:, None, :]
        allowed[:, prompt_width - 1 :, prompt_width - 1 :] |= ancestors
        allowed |= torch.eye(width, dtype=torch.bool, device=device)
        dtype = self.model.get_input_embeddings().weight.dtype  # that of the hidden states
        # 0 where allowed, the dtype's minimum elsewhere; on the CPU ~5x faster than masked_fill on zeros
        return (~allowed).to(dtype).mul_(torch.finfo(dtype).min)[:, None]

    def _decoder(self, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor | None = None) -> Tensor:
        """The decoder's last hidden state [N, T, H], without logits or other layers' states."""
        with adapters_in_model_dtype(self.model, self.adapter_dtype):
            return self.model.get_decoder()(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
            ).last_hidden_state

    def pairs(self, batch: Tokenised) -> PerToken:
        """Every pair as one right-padded sequence: prompt tokens then action tokens."""
        num_candidates = batch.num_candidates
        prompt_ids = batch.prompt_ids.repeat_interleave(num_candidates, 0)  # right-padded
        prompt_lengths = batch.prompt_mask.sum(-1).repeat_interleave(num_candidates, 0)[:, None]
        action_lengths = batch.action_lengths[:, None]
        prompt_width, action_width = prompt_ids.shape[1], batch.action_ids.shape[1]
        columns = torch.arange(prompt_width + action_width, device=prompt_ids.device)[None]
        # Splice [prompt tokens, action tokens, padding] per row with index arithmetic.
        from_prompt = prompt_ids.gather(1, columns.clamp(max=prompt_width - 1).expand(len(prompt_ids), -1))
        from_action = batch.action_ids.gather(1, (columns - prompt_lengths).clamp(0, action_width - 1))
        input_ids = torch.where(columns < prompt_lengths, from_prompt, from_action)
        attention_mask = (columns < prompt_lengths + action_lengths).long()
        # The state at position prompt_length - 1 + t predicts action token t.
        predicting = (prompt_lengths - 1 + torch.arange(action_width, device=columns.device)).clamp(
            max=input_ids.shape[1] - 1
        )
        if self.lean:
            hidden = self._decoder(input_ids, attention_mask)
            valid = valid_tokens(batch.action_lengths, action_width)
            rows = torch.arange(len(input_ids), device=columns.device)[:, None] * input_ids.shape[1] + predicting
            values = log_probs_at(hidden.flatten(0, 1), self.head, rows[valid], batch.action_ids[valid])
            logp = scatter_valid(values, valid)
        else:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, use_cache=False, output_hidden_states=True
            )
            hidden = out.hidden_states[-1]
            logits = out.logits.gather(1, predicting[..., None].expand(-1, -1, out.logits.shape[-1]))
            logp = token_logp(logits, batch.action_ids)
        action_hidden = at(hidden, prompt_lengths[:, 0] + batch.action_lengths - 1)
        prompt_hidden = at(hidden, prompt_lengths[:, 0] - 1)[::num_candidates]
        return PerToken(logp, action_hidden, prompt_hidden)

    def repeated_cache(self, batch: Tokenised) -> PerToken:
        """The left-padded prompts once with a KV cache, repeated over the candidates."""
        from transformers.cache_utils import DynamicCache

        model, num_candidates = self.model, batch.num_candidates
        prompt_mask = batch.prompt_mask
        # Left padding puts every prompt's last token in the last column; positions count only the
        # real tokens so that they equal those of the unpadded sequence.
        prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        first = model(
            input_ids=batch.prompt_ids,
            attention_mask=prompt_mask,
            position_ids=prompt_positions,
            use_cache=True,
            output_hidden_states=True,
            logits_to_keep=1,
            **{cache_argument(): DynamicCache(config=model.config)},
        )
        cache = getattr(first, cache_argument())
        cache.batch_repeat_interleave(num_candidates)
        action_ids = batch.action_ids
        steps = torch.arange(action_ids.shape[1], device=action_ids.device)
        action_token_mask = (steps < batch.action_lengths[:, None]).to(prompt_mask.dtype)
        attention_mask = torch.cat([prompt_mask.repeat_interleave(num_candidates, 0), action_token_mask], 1)
        prompt_lengths = prompt_mask.sum(-1).repeat_interleave(num_candidates, 0)
        rest = model(
            input_ids=action_ids,
            attention_mask=attention_mask,
            position_ids=prompt_lengths[:, None] + steps,
            use_cache=True,
            output_hidden_states=True,
            **{cache_argument(): cache},
        )
        return from_prefix_and_continuation(
            first.logits[:, -1],
            first.hidden_states[-1][:, -1],
            rest.logits,
            rest.hidden_states[-1],
            batch,
        )
