"""Candidate tokens' log-probabilities from an LLM's hidden states or logits.

The lean path (:func:`log_probs_at`) applies the LM head only to the hidden states whose next token is
a candidate token, a chunk of rows at a time, and reads each row's log-softmax at its target as
``logit[target] - logsumexp(logits)``: no [tokens, vocabulary] float32 tensor of the whole batch
exists at once (SmolLM2's vocabulary has 49,152 tokens). Under autograd each chunk is recomputed in
the backward pass (activation checkpointing), so that its logits are not kept either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

#: logits computed at once (rows x vocabulary): 16 MB in float32
LOGIT_CHUNK_ELEMENTS = 2**22
#: decoder-only model types whose logits are ``get_output_embeddings()(last hidden state)``, unscaled
#: and uncapped, and whose attention takes a 4D mask as given (``causal_scoring``)
LEAN_CAUSAL_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


@dataclass
class PerToken:
    """What every scoring path produces, before reduction to one score per candidate."""

    token_logp: Tensor  # [B*A, La] log P(action token t | prompt, previous tokens)
    action_hidden: Tensor  # [B*A, H] at each candidate's last token
    prompt_hidden: Tensor  # [B, H]


class LMHead:
    """The map from the decoder's last hidden states to logits, as the model's own forward applies
    it (T5 with tied embeddings scales the states by ``d_model ** -0.5`` first)."""

    def __init__(self, model: nn.Module):
        config, self.head = model.config, model.get_output_embeddings()
        self.vocabulary = self.head.weight.shape[0]
        scale = getattr(config, "scale_decoder_outputs", None)
        if scale is None:  # transformers releases before the flag: T5 scaled where embeddings are tied
            scale = config.is_encoder_decoder and config.tie_word_embeddings
        self.factor = config.d_model**-0.5 if scale else None

    def __call__(self, hidden: Tensor) -> Tensor:
        return self.head(hidden if self.factor is None else hidden * self.factor)


def log_probs_at(hidden: Tensor, head: LMHead, rows: Tensor, targets: Tensor) -> Tensor:
    """``log_softmax(head(hidden[rows[n]]))[targets[n]]`` for each n, in float32: [R, H] -> [N].

    Each distinct row's logits are computed once, ``LOGIT_CHUNK_ELEMENTS`` logits at a time."""
    used, index = torch.unique(rows, return_inverse=True)
    if not len(used):
        return hidden.new_zeros(0, dtype=torch.float32)
    chunk = max(1, LOGIT_CHUNK_ELEMENTS // head.vocabulary)
    checkpointed = torch.is_grad_enabled()
    pieces, order = [], []
    for first in range(0, len(used), chunk):
        pairs = ((index >= first) & (index < first + chunk)).nonzero().squeeze(1)
        local, wanted = index[pairs] - first, targets[pairs]
        states = hidden[used[first : first + chunk]]
        if checkpointed:
            pieces.append(checkpoint(_chunk_log_probs, states, head, local, wanted, use_reentrant=False))
        else:
            pieces.append(_chunk_log_probs(states, head, local, wanted))
        order.append(pairs)
    result = torch.cat(pieces)
    return result[torch.argsort(torch.cat(order))]


def _chunk_log_probs(states: Tensor, head, local: Tensor, targets: Tensor) -> Tensor:
    logits = head(states).float()
    return logits[local, targets] - logits.logsumexp(-1)[local]


def token_logp(logits: Tensor, targets: Tensor) -> Tensor:
    """log-softmax over the vocabulary, read at the target tokens: [N, T, V], [N, T] -> [N, T]."""
    return logits.float().log_softmax(-1).gather(2, targets[..., None]).squeeze(-1)


def at(hidden: Tensor, positions: Tensor) -> Tensor:
    """``hidden[n, positions[n]]`` for [N, T, H] -> [N, H]."""
    return hidden.gather(1, positions.long()[:, None, None].expand(-1, 1, hidden.shape[-1])).squeeze(1)


def valid_tokens(action_lengths: Tensor, width: int) -> Tensor:
    """[B*A, La] bool: the candidates' real tokens."""
    return torch.arange(width, device=action_lengths.device) < action_lengths[:, None]


def scatter_valid(values: Tensor, valid: Tensor) -> Tensor:
    """[N] values of the True cells of ``valid`` [B*A, La] -> [B*A, La], 0 elsewhere (differentiable)."""
    return values.new_zeros(valid.shape).index_put(valid.nonzero(as_tuple=True), values)


def from_full_sequences(logits: Tensor, hidden: Tensor, batch) -> PerToken:
    """Decoder over [start, action tokens]: position t predicts action token t."""
    logp = token_logp(logits[:, :-1], batch.action_ids)
    action_hidden = at(hidden, batch.action_lengths)  # the start token shifts positions by one
    prompt_hidden = hidden[:: batch.num_candidates, 0]
    return PerToken(logp, action_hidden, prompt_hidden)


def from_prefix_and_continuation(
    first_logits: Tensor, prompt_hidden: Tensor, rest_logits: Tensor, rest_hidden: Tensor, batch
) -> PerToken:
    """``first_logits`` [B, V] predict action token 0; ``rest_logits[:, t]`` predict token t+1."""
    first_logp = first_logits.float().log_softmax(-1)  # [B, V]
    first_tokens = batch.action_ids[:, 0].reshape(-1, batch.num_candidates)  # [B, A]
    first_token_logp = first_logp.gather(1, first_tokens).reshape(-1, 1)
    later_token_logp = token_logp(rest_logits[:, :-1], batch.action_ids[:, 1:])
    logp = torch.cat([first_token_logp, later_token_logp], 1)
    action_hidden = at(rest_hidden, batch.action_lengths - 1)
    return PerToken(logp, action_hidden, prompt_hidden)
