"""Encoder-decoder scoring paths of :class:`~torchrl_glam.modules.scoring.LLMScorer`.

The encoder runs once per prompt. T5-family decoders then run the candidates as a prefix tree in one
call (:meth:`Seq2SeqScoring.tree`): each distinct prefix of a prompt's candidates is one token of
the prompt's decoder sequence [start, the tree's nodes level by level]; a 4D mask lets each node
attend to its ancestors only, and its self-attention position bias is taken from its depth
(``modules/attention.py``), so each node computes exactly what the last token of its own prefix
would; the cross-attention keys/values of the prompt are computed once. Only the decoder's last
hidden state is kept and the LM head is applied where a candidate token is predicted
(``modules/token_log_probs.py``). For other models the start token runs once per prompt with a
cache, which computes the cross-attention keys/values of every layer once per prompt; the cache is
repeated over the prompt's A candidates and their tokens run in one batch. (Lamorel, the authors'
library, repeats the encoder states A times instead, so every candidate recomputes the
cross-attention projections of the whole prompt.)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from torchrl_glam.modules.attention import TREE_POSITION_BIAS, use_tree_attention
from torchrl_glam.modules.prefix_tree import prefix_tree, tree_layout
from torchrl_glam.modules.token_log_probs import (
    LMHead,
    PerToken,
    from_full_sequences,
    from_prefix_and_continuation,
    log_probs_at,
    scatter_valid,
    valid_tokens,
)
from torchrl_glam.modules.tokenisation import Tokenised
from torchrl_glam.modules.transformers_compat import cache_argument


class Seq2SeqScoring:
    """The encoder-decoder paths over a :class:`Tokenised` batch (see the module docstring).

    ``prefix_tree``: score the candidates as a prefix tree where the model's type allows it."""

    def __init__(self, model: nn.Module, prefix_tree: bool):
        self.model = model
        self.start_id = model.config.decoder_start_token_id
        if self.start_id is None:
            raise ValueError("the encoder-decoder model's config has no decoder_start_token_id")
        self.uses_tree = prefix_tree and use_tree_attention(model)
        self.head = LMHead(model) if self.uses_tree else None
        # T5's self-attention position bias by relative position comes from the decoder's own bias
        # table: its first layer holds it and every layer shares it. Found once.
        self.position_bias = (
            next(
                m for m in model.get_decoder().modules() if getattr(m, "has_relative_attention_bias", False)
            ).compute_bias
            if self.uses_tree
            else None
        )

    def __call__(self, batch: Tokenised, naive: bool, reuse_cache: bool) -> PerToken:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        model, num_candidates = self.model, batch.num_candidates
        pair_prompt_mask = batch.prompt_mask.repeat_interleave(num_candidates, 0)
        start = torch.full((batch.prompt_ids.shape[0], 1), self.start_id, device=batch.prompt_ids.device)
        if naive:
            # Every pair is its own sequence: the encoder and the whole decoder run B*A times.
            decoder_ids = torch.cat([start.repeat_interleave(num_candidates, 0), batch.action_ids], 1)
            out = model(
                input_ids=batch.prompt_ids.repeat_interleave(num_candidates, 0),
                attention_mask=pair_prompt_mask,
                decoder_input_ids=decoder_ids,
                use_cache=False,
                output_hidden_states=True,
            )
            return from_full_sequences(out.logits, out.decoder_hidden_states[-1], batch)

        encoder_states = model.get_encoder()(
            input_ids=batch.prompt_ids, attention_mask=batch.prompt_mask
        ).last_hidden_state
        if not reuse_cache:  # gradient checkpointing: encoder shared, decoder over full pairs
            decoder_ids = torch.cat([start.repeat_interleave(num_candidates, 0), batch.action_ids], 1)
            pair_encoder_states = encoder_states.repeat_interleave(num_candidates, 0)
            out = model(
                encoder_outputs=(pair_encoder_states,),
                attention_mask=pair_prompt_mask,
                decoder_input_ids=decoder_ids,
                use_cache=False,
                output_hidden_states=True,
            )
            return from_full_sequences(out.logits, out.decoder_hidden_states[-1], batch)

        if self.uses_tree:
            return self.tree(encoder_states, batch)
        # Other encoder-decoders: the start token once per prompt fills the cross-attention cache
        # of every layer. The decoder reads the encoder states only through its cross-attention
        # projections. The repeat is a copy of [B*A, Lp, H] activations; with the repeated cache,
        # no projection of it is ever computed (the cached keys/values are used).
        first = model(
            encoder_outputs=(encoder_states,),
            attention_mask=batch.prompt_mask,
            decoder_input_ids=start,
            use_cache=True,
            output_hidden_states=True,
            **{cache_argument(): EncoderDecoderCache(DynamicCache(), DynamicCache())},
        )
        cache = getattr(first, cache_argument())
        cache.batch_repeat_interleave(num_candidates)
        rest = model(
            encoder_outputs=(encoder_states.repeat_interleave(num_candidates, 0),),
            attention_mask=pair_prompt_mask,
            decoder_input_ids=batch.action_ids,
            use_cache=True,
            output_hidden_states=True,
            **{cache_argument(): cache},
        )
        return from_prefix_and_continuation(
            first.logits[:, -1],
            first.decoder_hidden_states[-1][:, -1],
            rest.logits,
            rest.decoder_hidden_states[-1],
            batch,
        )

    def tree(self, encoder_states: Tensor, batch: Tokenised) -> PerToken:
        """The candidates' tokens as a prefix tree in one decoder call (see the module docstring)."""
        tree = prefix_tree(batch.action_ids, batch.action_lengths, batch.num_candidates)
        layout = tree_layout(tree, len(batch.prompt_ids), self.start_id)
        levels = len(tree.tokens) + 1
        table = self.position_bias(levels, levels, device=encoder_states.device)  # [1, h, depth, depth]
        position_bias = table[:, :, layout.depth[:, None], layout.depth[None, :]]
        blocked = torch.finfo(encoder_states.dtype).min
        tree_mask = torch.zeros(layout.ancestors.shape, dtype=encoder_states.dtype, device=encoder_states.device)
        tree_mask = tree_mask.masked_fill(~layout.ancestors, blocked)[:, None]
        hidden = self.model.get_decoder()(
            input_ids=layout.input_ids,
            attention_mask=tree_mask,
            encoder_hidden_states=encoder_states,
            encoder_attention_mask=batch.prompt_mask,
            use_cache=False,
            **{TREE_POSITION_BIAS: position_bias},
        ).last_hidden_state
        node_hidden = hidden.flatten(0, 1)[layout.node]  # in the tree's stacked order
        valid = valid_tokens(batch.action_lengths, batch.action_ids.shape[1])
        values = log_probs_at(node_hidden, self.head, tree.predictors[valid], batch.action_ids[valid])
        return PerToken(scatter_valid(values, valid), node_hidden[tree.last], hidden[:, 0])
