"""The LLM scorer: one forward gives every candidate's log-probability score and the hidden states
the critic reads (SAC-GLAM, paper eq. 1-2 and App. B).

For a prompt p and a candidate action a = (w_1, ..., w_n), the score is
``sum_t log P(w_t | p, w_<t)`` (``normalization="sum"``, the paper) or its mean over the n tokens
(``"mean"``); the actor turns the scores of the candidates into a softmax. The scorer also returns

* ``action_hidden`` [*B, A, H]: the LLM's last hidden state at each candidate's last token (the
  representation of prompt + action, input of the observation-action critic), and
* ``prompt_hidden`` [*B, H]: the representation of the prompt alone (input of the observation-only
  critic): for an encoder-decoder, the decoder's last hidden state at the decoder start token; for a
  decoder-only model, the last hidden state at the prompt's last token.

Tokenisation (``tokenization="exact"``, the default) follows lm-evaluation-harness's
log-likelihood of a continuation: whitespace at the end of the prompt ("...Action: ") moves to the
start of the candidate (" Go to red cat"), so that a subword tokenizer sees the word with its
leading space, as in pretraining, instead of a lone space token followed by a space-less word. For a
decoder-only model the whole text is tokenised once and the candidate's tokens are those after the
prompt's own tokenisation; the prompt's tokens are the shared prefix. Where a BPE merge crosses the
boundary (the whole text's tokens do not start with the prompt's), the harness would drop the merged
characters; the candidate text (with the moved whitespace) is then tokenised alone, so that the
scored tokens always spell prompt + candidate. For an encoder-decoder, the stripped prompt goes to
the encoder and the candidate (with the moved whitespace) is tokenised alone for the decoder.
``tokenization="separate"`` tokenises the prompt and the candidate apart, as Lamorel (the authors'
library) does; with SmolLM2 that costs ~10 nats per candidate. Word-level tokenizers (the offline
tiny models) give the same tokens either way.

Shared-prefix scoring (the default) computes what depends on the prompt once per prompt:

* encoder-decoder: the encoder runs once per prompt. For T5-family models the decoder then runs
  the candidates as a prefix tree, in one call: each distinct prefix of a prompt's candidates is
  one token of the prompt's decoder sequence [start, the tree's nodes level by level] (on the full
  task set the six "Go to <colour> <type>" share "Go" and "Go to", and their colours: at most 14
  decoder tokens per prompt instead of 8 candidates x 5 padded tokens). A 4D mask lets each node
  attend to its ancestors only, and its self-attention position bias is taken from its depth
  (``modules/attention.py``), so each node computes exactly what the last token of its own prefix
  would; the cross-attention keys/values of the prompt are computed once. For other models the
  start token runs once per prompt with a cache, which computes the cross-attention keys/values
  of every layer once per prompt; the cache is repeated over the prompt's A candidates and their
  tokens run in one batch. (Lamorel, the authors' library, repeats the encoder states A times
  instead, so every candidate recomputes the cross-attention projections of the whole prompt.)
* decoder-only: the left-padded prompts run once with a KV cache (position ids count real tokens
  only), the cache is repeated over the candidates, and the candidates run in one batch.

:meth:`LLMScorer.naive` computes the same quantities by running every (prompt, candidate) pair as
its own sequence; tests check both agree to 1e-5 and the benchmark compares their speed.
With gradient checkpointing on and the model training, transformers drops every KV cache, so the
scorer falls back to caches-free paths: encoder once per prompt and the decoder over the repeated
encoder states (encoder-decoder), or the naive pairs (decoder-only).
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from torchrl_glam.modules.attention import TREE_POSITION_BIAS, use_tree_attention
from torchrl_glam.modules.loading import LLMConfig, LoadedLLM, load_llm

PROMPT_KEY = "prompt"
ACTIONS_KEY = "actions"
ACTION_MASK_KEY = "action_mask"
SCORES_KEY = "action_scores"
ACTION_HIDDEN_KEY = "action_hidden"
PROMPT_HIDDEN_KEY = "prompt_hidden"

Normalization = Literal["sum", "mean"]
Tokenization = Literal["exact", "separate"]


@functools.cache
def _cache_argument() -> str:
    """The name of a model's KV-cache argument and output in the installed transformers: it renamed
    ``past_key_values`` to ``cache`` and warns that the old name goes in 5.40; older releases know
    only the old one. The output dataclasses carry the name a release uses. (transformers is
    imported here, not with this module, as everywhere in the package: ``import torchrl_glam``
    stays light.)"""
    from transformers.modeling_outputs import Seq2SeqLMOutput

    return "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


@dataclass
class _Tokenised:
    prompt_ids: Tensor  # [B, Lp] padded (left for decoder-only prefixes, right otherwise)
    prompt_mask: Tensor  # [B, Lp] 1 on real tokens
    action_ids: Tensor  # [B*A, La] right-padded
    action_lengths: Tensor  # [B*A] number of real tokens (>= 1)
    num_candidates: int  # A


@dataclass
class _PerToken:
    """What every scoring path produces, before reduction to one score per candidate."""

    token_logp: Tensor  # [B*A, La] log P(action token t | prompt, previous tokens)
    action_hidden: Tensor  # [B*A, H] at each candidate's last token
    prompt_hidden: Tensor  # [B, H]


class LLMScorer(nn.Module):
    """Scores candidate actions with an LLM; see the module docstring.

    Args:
        model: a ``transformers`` seq2seq or causal LM (possibly wrapped by peft).
        tokenizer: its tokenizer.
        is_encoder_decoder: which of the two kinds ``model`` is.
        normalization: ``"sum"`` of token log-probs (the paper) or ``"mean"`` per token.
        shared_prefix: compute the prompt's part once per prompt (``False``: naive pairs).
        tokenization: ``"exact"`` (default): a candidate's tokens are those of the continuation as
            lm-evaluation-harness defines it (see the module docstring); ``"separate"``: prompt and
            candidate tokenised apart, as Lamorel (the authors' code) does.
    """

    def __init__(
        self, model: nn.Module, tokenizer, is_encoder_decoder: bool,
        normalization: Normalization = "sum", shared_prefix: bool = True,
        tokenization: Tokenization = "exact",
    ):
        super().__init__()
        if normalization not in ("sum", "mean"):
            raise ValueError(f"normalization must be 'sum' or 'mean', got {normalization!r}")
        if tokenization not in ("exact", "separate"):
            raise ValueError(f"tokenization must be 'exact' (lm-evaluation-harness) or 'separate' "
                             f"(Lamorel), got {tokenization!r}")
        self.tokenization = tokenization
        self.model = model
        self.tokenizer = tokenizer
        self.is_encoder_decoder = is_encoder_decoder
        self.normalization = normalization
        self.shared_prefix = shared_prefix
        if tokenizer.pad_token_id is None:  # e.g. Llama: padding needs some id; its value is masked
            tokenizer.pad_token = tokenizer.eos_token
        self.pad_id = tokenizer.pad_token_id
        config = model.config
        self.hidden_size = getattr(config, "d_model", None) or config.hidden_size
        if is_encoder_decoder:
            self.decoder_start_id = config.decoder_start_token_id
            if self.decoder_start_id is None:
                raise ValueError("the encoder-decoder model's config has no decoder_start_token_id")
        # bitsandbytes repacks 4-bit weights on a forward in eval mode (see loading.py), after which
        # LoRA gradients vanish: a quantised LLM is kept in train mode whatever its parent does.
        self._quantized = any(type(m).__name__ in ("Linear4bit", "Linear8bitLt") for m in model.modules())
        # Candidate texts repeat across steps and environments (N+2 texts from a small vocabulary):
        # each is tokenised once.
        self._candidate_ids: dict[str, tuple[int, ...]] = {}
        # T5-family decoders: a prompt's candidates run as a prefix tree in one decoder call
        # (modules/attention.py gives each node its depth's position bias); other models repeat
        # the prompt's cache per candidate.
        self._tree_attention = is_encoder_decoder and shared_prefix and use_tree_attention(model)
        # T5's self-attention position bias by relative position comes from the decoder's own bias
        # table: its first layer holds it and every layer shares it. Found once; a bound method,
        # so that the module is not registered a second time under the scorer (its state dict).
        self._decoder_position_bias = next(
            m for m in model.get_decoder().modules() if getattr(m, "has_relative_attention_bias", False)
        ).compute_bias if self._tree_attention else None

    # ------------------------------------------------------------------ public API
    def forward(self, prompt, actions, action_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Scores [*B, A], action hidden states [*B, A, H] and prompt hidden states [*B, H].

        ``prompt``: a str or (nested) list of str / NonTensorStack of batch shape ``*B``;
        ``actions``: (nested) lists of str / NonTensorStack of shape [*B, A]; ``action_mask``: bool
        tensor [*B, A] (masked candidates are scored too; the actor gives them probability 0).
        """
        return self._score(prompt, actions, action_mask, naive=not self.shared_prefix)

    def naive(self, prompt, actions, action_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The same as :meth:`forward`, running every (prompt, candidate) pair as its own sequence."""
        return self._score(prompt, actions, action_mask, naive=True)

    def train(self, mode: bool = True) -> LLMScorer:
        super().train(mode)
        if self._quantized:
            self.model.train(True)
        return self

    # ------------------------------------------------------------------ inputs
    def _score(self, prompt, actions, action_mask: Tensor, naive: bool):
        prompts, candidates, mask, batch_shape = _flatten_inputs(prompt, actions, action_mask)
        if self._quantized and not self.model.training:
            warnings.warn("the quantised LLM was put in eval mode; switching it back to train mode "
                          "(bitsandbytes would silently zero the LoRA gradients)", stacklevel=3)
            self.model.train(True)
        checkpointing = self.model.training and _activation_checkpointing(self.model)
        if self.is_encoder_decoder:
            batch = self._tokenise(prompts, candidates, mask, left_pad_prompts=False)
            per_token = self._seq2seq(batch, naive=naive, reuse_cache=not checkpointing)
        else:
            batch = self._tokenise(prompts, candidates, mask, left_pad_prompts=not (naive or checkpointing))
            per_token = self._causal_pairs(batch) if naive or checkpointing else self._causal_prefix(batch)
        scores = self._reduce(per_token.token_logp, batch.action_lengths)
        num_candidates = batch.num_candidates
        return (
            scores.reshape(*batch_shape, num_candidates),
            per_token.action_hidden.float().reshape(*batch_shape, num_candidates, -1),
            per_token.prompt_hidden.float().reshape(*batch_shape, -1),
        )

    def _tokenise(self, prompts: list[str], candidates: list[list[str]], mask: Tensor,
                  left_pad_prompts: bool) -> _Tokenised:
        if self.tokenization == "exact":
            return self._tokenise_exact(prompts, candidates, mask, left_pad_prompts)
        prompt_rows = self._encode(prompts)
        action_rows = self._tokenise_alone([text for row in candidates for text in row])
        return self._pack(prompt_rows, action_rows, mask, len(candidates[0]), left_pad_prompts)

    def _tokenise_exact(self, prompts: list[str], candidates: list[list[str]], mask: Tensor,
                        left_pad_prompts: bool) -> _Tokenised:
        """lm-evaluation-harness's ``_encode_pair``, batched (see the module docstring)."""
        num_candidates = len(candidates[0])
        contexts = [prompt.rstrip() for prompt in prompts]
        moved = [prompt[len(context):] for prompt, context in zip(prompts, contexts)]
        context_ids = self._encode(contexts)
        for prompt, ids in zip(prompts, context_ids):
            if not ids:
                raise ValueError(f"the prompt {prompt!r} has no tokens once its trailing whitespace "
                                 "moves to the candidates; give a prompt with some text")
        continuations = [space + text for space, row in zip(moved, candidates) for text in row]
        if self.is_encoder_decoder:
            # The decoder starts a new sequence: the continuation is tokenised alone (the harness's
            # seq2seq rule), without special tokens.
            action_rows = self._tokenise_alone(continuations)
        else:
            # Decoder-only: the whole text once; the candidate's tokens are those after the
            # context's own tokenisation. Where a merge crosses the boundary (the whole text's
            # tokens do not start with the context's), the harness would drop the merged characters
            # from the continuation; the continuation is then tokenised alone instead, so that
            # context + continuation tokens still spell exactly prompt + candidate.
            pair_contexts = [ids for ids in context_ids for _ in range(num_candidates)]
            wholes = self._encode([contexts[i // num_candidates] + text for i, text in enumerate(continuations)])
            action_rows = [None] * len(wholes)
            crossing = []
            for i, (whole, context) in enumerate(zip(wholes, pair_contexts)):
                if whole[:len(context)] == context:
                    action_rows[i] = whole[len(context):]
                else:
                    crossing.append(i)
            if crossing:
                alone = self._tokenise_alone([continuations[i] for i in crossing])
                for i, row in zip(crossing, alone):
                    action_rows[i] = row
        return self._pack(context_ids, action_rows, mask, num_candidates, left_pad_prompts)

    def _tokenise_alone(self, texts: list[str]) -> list[tuple[int, ...]]:
        """Each text tokenised on its own, without special tokens (cached: candidates repeat)."""
        missing = [text for text in dict.fromkeys(texts) if text not in self._candidate_ids]
        if missing:
            if len(self._candidate_ids) > 100_000:  # open-ended action texts: do not grow forever
                self._candidate_ids.clear()
            rows = self._encode(missing, add_special_tokens=False)
            self._candidate_ids.update({text: tuple(row) for text, row in zip(missing, rows)})
        return [self._candidate_ids[text] for text in texts]

    def _encode(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """``tokenizer(texts, add_special_tokens=...)["input_ids"]``. A fast tokenizer that pads and
        truncates nothing itself is asked directly, through the tokenizers library's
        ``encode_batch_fast``: the same ids, without the character offsets that transformers' call
        has computed and then dropped (128 full-set prompts: 6.2 -> 4.4 ms, ``docs/results/loop_speed``)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        encode = getattr(backend, "encode_batch_fast", None)
        if encode is None or backend.padding is not None or backend.truncation is not None:
            return self.tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]
        return [encoding.ids for encoding in encode(texts, add_special_tokens=add_special_tokens)]

    def _pack(self, prompt_rows: list[list[int]], action_rows: list[Sequence[int]], mask: Tensor,
              num_candidates: int, left_pad_prompts: bool) -> _Tokenised:
        """Pads token lists into a :class:`_Tokenised` batch."""
        device = self._device()
        prompt_ids, prompt_mask = _pad_rows(prompt_rows, self.pad_id, left=left_pad_prompts)
        # A batch's B*A candidates are a few distinct token rows (N+2 texts per prompt from a small
        # vocabulary): each distinct row is padded once and the batch indexes them.
        rows = [tuple(row) for row in action_rows]
        position = {row: index for index, row in enumerate(dict.fromkeys(rows))}
        table, table_mask = _pad_rows(list(position), self.pad_id)
        index = torch.tensor([position[row] for row in rows])
        action_lengths = _checked_action_lengths(table_mask.sum(-1)[index], mask)
        return _Tokenised(
            prompt_ids=prompt_ids.to(device), prompt_mask=prompt_mask.to(device),
            action_ids=table[index].to(device), action_lengths=action_lengths.to(device),
            num_candidates=num_candidates,
        )

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ encoder-decoder
    def _seq2seq(self, batch: _Tokenised, naive: bool, reuse_cache: bool) -> _PerToken:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        model, num_candidates = self.model, batch.num_candidates
        pair_prompt_mask = batch.prompt_mask.repeat_interleave(num_candidates, 0)
        start = torch.full((batch.prompt_ids.shape[0], 1), self.decoder_start_id, device=batch.prompt_ids.device)
        if naive:
            # Every pair is its own sequence: the encoder and the whole decoder run B*A times.
            decoder_ids = torch.cat([start.repeat_interleave(num_candidates, 0), batch.action_ids], 1)
            out = model(input_ids=batch.prompt_ids.repeat_interleave(num_candidates, 0),
                        attention_mask=pair_prompt_mask, decoder_input_ids=decoder_ids,
                        use_cache=False, output_hidden_states=True)
            return self._from_full_sequences(out.logits, out.decoder_hidden_states[-1], batch)

        encoder_states = model.get_encoder()(
            input_ids=batch.prompt_ids, attention_mask=batch.prompt_mask).last_hidden_state
        if not reuse_cache:  # gradient checkpointing: encoder shared, decoder over full pairs
            decoder_ids = torch.cat([start.repeat_interleave(num_candidates, 0), batch.action_ids], 1)
            pair_encoder_states = encoder_states.repeat_interleave(num_candidates, 0)
            out = model(encoder_outputs=(pair_encoder_states,), attention_mask=pair_prompt_mask,
                        decoder_input_ids=decoder_ids, use_cache=False, output_hidden_states=True)
            return self._from_full_sequences(out.logits, out.decoder_hidden_states[-1], batch)

        if self._tree_attention:
            return self._tree_decoding(encoder_states, batch)
        # Other encoder-decoders: the start token once per prompt fills the cross-attention cache
        # of every layer. The decoder reads the encoder states only through its cross-attention
        # projections. The repeat is a copy of [B*A, Lp, H] activations; with the repeated cache,
        # no projection of it is ever computed (the cached keys/values are used).
        first = model(encoder_outputs=(encoder_states,), attention_mask=batch.prompt_mask,
                      decoder_input_ids=start, use_cache=True, output_hidden_states=True,
                      **{_cache_argument(): EncoderDecoderCache(DynamicCache(), DynamicCache())})
        cache = getattr(first, _cache_argument())
        cache.batch_repeat_interleave(num_candidates)
        rest = model(encoder_outputs=(encoder_states.repeat_interleave(num_candidates, 0),),
                     attention_mask=pair_prompt_mask, decoder_input_ids=batch.action_ids,
                     use_cache=True, output_hidden_states=True, **{_cache_argument(): cache})
        return self._from_prefix_and_continuation(
            first.logits[:, -1], first.decoder_hidden_states[-1][:, -1],
            rest.logits, rest.decoder_hidden_states[-1], batch,
        )

    def _tree_decoding(self, encoder_states: Tensor, batch: _Tokenised) -> _PerToken:
        """The candidates' tokens as a prefix tree in one decoder call: each distinct prefix of a
        prompt's candidates runs once ("Go" and "Go to" once for the N "Go to X"), as one token of
        the prompt's decoder sequence [start, the tree's nodes level by level]. Each node attends to
        its ancestors only (a 4D decoder mask), and its self-attention position bias is that of its
        depth (``modules/attention.py``), so every node computes what it would as the last token of
        its own prefix."""
        tree = _prefix_tree(batch.action_ids, batch.action_lengths, batch.num_candidates)
        layout = _tree_layout(tree, len(batch.prompt_ids), self.decoder_start_id)
        levels = len(tree.tokens) + 1
        table = self._decoder_position_bias(levels, levels, device=encoder_states.device)  # [1, h, depth, depth]
        position_bias = table[:, :, layout.depth[:, None], layout.depth[None, :]]
        blocked = torch.finfo(encoder_states.dtype).min
        tree_mask = torch.zeros(layout.ancestors.shape, dtype=encoder_states.dtype, device=encoder_states.device)
        tree_mask = tree_mask.masked_fill(~layout.ancestors, blocked)[:, None]
        out = self.model(encoder_outputs=(encoder_states,), attention_mask=batch.prompt_mask,
                         decoder_input_ids=layout.input_ids, decoder_attention_mask=tree_mask,
                         use_cache=False, output_hidden_states=True,
                         **{TREE_POSITION_BIAS: position_bias})
        node_logp = out.logits.flatten(0, 1).float().log_softmax(-1)[layout.node]  # stacked node order
        hidden = out.decoder_hidden_states[-1]
        node_hidden = hidden.flatten(0, 1)[layout.node]
        token_logp = node_logp[tree.predictors, batch.action_ids]
        return _PerToken(token_logp, node_hidden[tree.last], hidden[:, 0])

    # ------------------------------------------------------------------ decoder-only
    def _causal_prefix(self, batch: _Tokenised) -> _PerToken:
        from transformers.cache_utils import DynamicCache

        model, num_candidates = self.model, batch.num_candidates
        prompt_mask = batch.prompt_mask
        # Left padding puts every prompt's last token in the last column; positions count only the
        # real tokens so that they equal those of the unpadded sequence.
        prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        first = model(input_ids=batch.prompt_ids, attention_mask=prompt_mask, position_ids=prompt_positions,
                      use_cache=True, output_hidden_states=True, logits_to_keep=1,
                      **{_cache_argument(): DynamicCache(config=model.config)})
        cache = getattr(first, _cache_argument())
        cache.batch_repeat_interleave(num_candidates)
        action_ids = batch.action_ids
        steps = torch.arange(action_ids.shape[1], device=action_ids.device)
        action_token_mask = (steps < batch.action_lengths[:, None]).to(prompt_mask.dtype)
        attention_mask = torch.cat([prompt_mask.repeat_interleave(num_candidates, 0), action_token_mask], 1)
        prompt_lengths = prompt_mask.sum(-1).repeat_interleave(num_candidates, 0)
        rest = model(input_ids=action_ids, attention_mask=attention_mask,
                     position_ids=prompt_lengths[:, None] + steps, use_cache=True,
                     output_hidden_states=True, **{_cache_argument(): cache})
        return self._from_prefix_and_continuation(
            first.logits[:, -1], first.hidden_states[-1][:, -1], rest.logits, rest.hidden_states[-1], batch,
        )

    def _causal_pairs(self, batch: _Tokenised) -> _PerToken:
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
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                         output_hidden_states=True)
        # Logits at position prompt_length - 1 + t predict action token t.
        predicting = (prompt_lengths - 1 + torch.arange(action_width, device=columns.device)).clamp(
            max=input_ids.shape[1] - 1)
        logits = out.logits.gather(1, predicting[..., None].expand(-1, -1, out.logits.shape[-1]))
        hidden = out.hidden_states[-1]
        token_logp = _token_logp(logits, batch.action_ids)
        action_hidden = _at(hidden, prompt_lengths[:, 0] + batch.action_lengths - 1)
        prompt_hidden = _at(hidden, prompt_lengths[:, 0] - 1)[::num_candidates]
        return _PerToken(token_logp, action_hidden, prompt_hidden)

    # ------------------------------------------------------------------ shared reductions
    def _from_full_sequences(self, logits: Tensor, hidden: Tensor, batch: _Tokenised) -> _PerToken:
        """Decoder over [start, action tokens]: position t predicts action token t."""
        token_logp = _token_logp(logits[:, :-1], batch.action_ids)
        action_hidden = _at(hidden, batch.action_lengths)  # the start token shifts positions by one
        prompt_hidden = hidden[:: batch.num_candidates, 0]
        return _PerToken(token_logp, action_hidden, prompt_hidden)

    def _from_prefix_and_continuation(self, first_logits: Tensor, prompt_hidden: Tensor,
                                      rest_logits: Tensor, rest_hidden: Tensor,
                                      batch: _Tokenised) -> _PerToken:
        """``first_logits`` [B, V] predict action token 0; ``rest_logits[:, t]`` predict token t+1."""
        first_logp = first_logits.float().log_softmax(-1)  # [B, V]
        first_tokens = batch.action_ids[:, 0].reshape(-1, batch.num_candidates)  # [B, A]
        first_token_logp = first_logp.gather(1, first_tokens).reshape(-1, 1)
        later_token_logp = _token_logp(rest_logits[:, :-1], batch.action_ids[:, 1:])
        token_logp = torch.cat([first_token_logp, later_token_logp], 1)
        action_hidden = _at(rest_hidden, batch.action_lengths - 1)
        return _PerToken(token_logp, action_hidden, prompt_hidden)

    def _reduce(self, token_logp: Tensor, lengths: Tensor) -> Tensor:
        steps = torch.arange(token_logp.shape[1], device=token_logp.device)
        summed = token_logp.masked_fill(steps >= lengths[:, None], 0.0).sum(-1)
        return summed if self.normalization == "sum" else summed / lengths


def _pad_rows(rows: Sequence[Sequence[int]], pad_id: int, left: bool = False) -> tuple[Tensor, Tensor]:
    """Token rows -> ids [N, W] padded with ``pad_id`` (on the right, or the left) and the mask of
    real tokens, in a few tensor operations instead of one tensor per row (a batch has B*A rows).
    An empty row becomes one pad token with mask 0."""
    lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
    width = max(int(lengths.max()), 1) if len(rows) else 1
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    real = torch.zeros(len(rows), width, dtype=torch.long)
    flat = torch.tensor([token for row in rows for token in row], dtype=torch.long)
    if len(flat):
        row_of = torch.repeat_interleave(torch.arange(len(rows)), lengths)
        first = torch.cumsum(lengths, 0) - lengths  # index in ``flat`` of each row's first token
        column = torch.arange(len(flat)) - first[row_of]
        if left:
            column += (width - lengths)[row_of]
        ids[row_of, column] = flat
        real[row_of, column] = 1
    return ids, real


@dataclass
class _PrefixTree:
    """The candidates of each prompt as a prefix tree, level by level (see :func:`_prefix_tree`).

    The decoder's outputs are stacked level after level: level 0 is the start token (one row per
    prompt), level d has ``B * K_d`` rows, the prefixes of length d of prompt b's candidates in rows
    ``b * K_d ...``, padded to the widest prompt's K_d with copies that nobody reads."""

    tokens: list[Tensor]  # level d (1..La): [B*K_d] the last token of each prefix
    parents: list[Tensor]  # level d: [B*K_d] the row of its parent within level d-1
    predictors: Tensor  # [B*A, La] stacked row whose logits predict candidate token t (prefix of length t)
    last: Tensor  # [B*A] stacked row of each candidate's last token (the whole candidate)


def _prefix_tree(action_ids: Tensor, lengths: Tensor, num_candidates: int) -> _PrefixTree:
    """The prefix tree of ``action_ids`` [B*A, La] (``lengths`` real tokens each), in a few tensor
    operations per level (a batch has B*A = 1,024 candidates on the CPU preset)."""
    rows, width = action_ids.shape
    prompts = rows // num_candidates
    prompt_of = torch.arange(rows, device=action_ids.device) // num_candidates
    row = prompt_of  # each candidate's prefix at the current level, as a stacked row (level 0: start)
    level_start, level_width, offset = 0, 1, prompts  # the previous level's first row and K; the next free row
    vocabulary = int(action_ids.max()) + 1
    predictors, tokens, parents, last = [row], [], [], row
    for depth in range(1, width + 1):
        alive = lengths >= depth
        # a node is (its parent's row, its token); parents' rows grow with their prompt, so the
        # sorted unique keys list each prompt's nodes together, prompt after prompt
        nodes, node_of = torch.unique(row[alive] * vocabulary + action_ids[alive, depth - 1], return_inverse=True)
        node_parent, node_token = nodes // vocabulary, nodes % vocabulary
        node_prompt = (node_parent - level_start) // level_width
        counts = torch.bincount(node_prompt, minlength=prompts)
        count = int(counts.max())
        first_of_prompt = (counts.cumsum(0) - counts)[node_prompt]  # index of its prompt's first node
        node_row = node_prompt * count + torch.arange(len(nodes), device=nodes.device) - first_of_prompt
        # padding rows continue the first row of their prompt's previous level
        level_tokens = node_token.new_full((prompts * count,), int(node_token[0]))
        level_tokens[node_row] = node_token
        level_parents = torch.arange(prompts * count, device=nodes.device) // count * level_width
        level_parents[node_row] = node_parent - level_start
        tokens.append(level_tokens)
        parents.append(level_parents)
        row = row.clone()
        row[alive] = offset + node_row[node_of]
        last = torch.where(lengths == depth, row, last)
        if depth < width:  # token ``depth`` is predicted by the prefix of length ``depth``
            predictors.append(torch.where(alive, row, prompt_of))
        level_start, level_width, offset = offset, count, offset + prompts * count
    return _PrefixTree(tokens, parents, torch.stack(predictors, 1), last)


@dataclass
class _TreeLayout:
    """A :class:`_PrefixTree` as one decoder sequence per prompt: slot 0 the start token, then the
    nodes of level 1, of level 2, ... (``S`` slots: 1 + the sum of the levels' widths K_d)."""

    input_ids: Tensor  # [B, S] each slot's token
    depth: Tensor  # [S] each slot's level (its position in its own prefix)
    ancestors: Tensor  # [B, S, S] bool: slot j is slot i or one of its ancestors
    node: Tensor  # [B*S'] the flat slot (b * S + slot) of each stacked row of the tree, in its order


def _tree_layout(tree: _PrefixTree, prompts: int, start_id: int) -> _TreeLayout:
    """Where each node of ``tree`` (over ``prompts`` prompts) sits in its prompt's decoder
    sequence (see :class:`_TreeLayout`)."""
    device = tree.last.device
    widths = [len(tokens) // prompts for tokens in tree.tokens]  # K_d
    firsts = [0]  # slot of each level's first node
    for width in [1, *widths[:-1]]:
        firsts.append(firsts[-1] + width)
    slots = firsts[-1] + widths[-1]
    columns = [torch.full((prompts, 1), start_id, dtype=torch.long, device=device)]
    parent = [torch.zeros(prompts, 1, dtype=torch.long, device=device)]  # the start token: its own
    base = torch.arange(prompts, device=device)[:, None] * slots
    node = [base[:, 0]]
    for level, (tokens, parents) in enumerate(zip(tree.tokens, tree.parents), start=1):
        width, parent_width = widths[level - 1], 1 if level == 1 else widths[level - 2]
        columns.append(tokens.reshape(prompts, width))
        # ``parents``: the row within the previous level, b * K_{d-1} + k'; its slot is k' there
        within = parents.reshape(prompts, width) - torch.arange(prompts, device=device)[:, None] * parent_width
        parent.append(firsts[level - 1] + within)
        node.append((base + firsts[level] + torch.arange(width, device=device)).reshape(-1))
    parent_slot = torch.cat(parent, 1)
    depth = torch.cat([torch.full((w,), d, dtype=torch.long, device=device)
                       for d, w in enumerate([1, *widths])])
    ancestors = torch.eye(slots, dtype=torch.bool, device=device).expand(prompts, slots, slots).clone()
    current = torch.arange(slots, device=device).expand(prompts, slots)
    for _ in widths:
        current = parent_slot.gather(1, current)
        ancestors.scatter_(2, current[..., None], True)
    return _TreeLayout(torch.cat(columns, 1), depth, ancestors, torch.cat(node))


def _checked_action_lengths(action_lengths: Tensor, mask: Tensor) -> Tensor:
    """Candidates' token counts, an empty candidate counted as one pad token (then masked out);
    an empty *legal* candidate is an error."""
    empty = action_lengths == 0
    if empty.any():
        if (empty & mask.reshape(-1).cpu()).any():
            raise ValueError("a legal (unmasked) candidate action has no tokens; empty action texts "
                             "are only allowed for masked candidates")
        action_lengths = action_lengths.clamp(min=1)
    return action_lengths


def _activation_checkpointing(model: nn.Module) -> bool:
    # transformers 5 renamed ``is_gradient_checkpointing`` (deprecated) to ``is_activation_checkpointing``.
    flag = getattr(model, "is_activation_checkpointing", None)
    if flag is None:
        flag = getattr(model, "is_gradient_checkpointing", False)
    return bool(flag)


def _token_logp(logits: Tensor, targets: Tensor) -> Tensor:
    """log-softmax over the vocabulary, read at the target tokens: [N, T, V], [N, T] -> [N, T]."""
    return logits.float().log_softmax(-1).gather(2, targets[..., None]).squeeze(-1)


def _at(hidden: Tensor, positions: Tensor) -> Tensor:
    """``hidden[n, positions[n]]`` for [N, T, H] -> [N, H]."""
    return hidden.gather(1, positions.long()[:, None, None].expand(-1, 1, hidden.shape[-1])).squeeze(1)


# ---------------------------------------------------------------------- input coercion
def _as_python(texts):
    """NonTensorData/NonTensorStack/LinkedList -> plain str or nested lists."""
    if isinstance(texts, str):
        return texts
    if hasattr(texts, "tolist"):
        texts = texts.tolist()
    elif hasattr(texts, "data") and not isinstance(texts, Tensor):  # NonTensorData
        texts = texts.data
    if isinstance(texts, str):
        return texts
    if isinstance(texts, Sequence) or hasattr(texts, "__iter__"):
        return [_as_python(item) for item in texts]
    raise TypeError(f"expected text or (nested) lists of text, got {type(texts).__name__}")


def _flatten(texts, shape: tuple[int, ...], name: str) -> list[str]:
    if not shape:
        if not isinstance(texts, str):
            raise TypeError(f"{name}: expected a str at the innermost level, got {type(texts).__name__}")
        return [texts]
    if isinstance(texts, str) or len(texts) != shape[0]:
        got = "a single string" if isinstance(texts, str) else f"{len(texts)} entries"
        raise ValueError(f"{name} has {got} where the action mask's shape asks for {shape[0]} "
                         f"(expected {name} of shape {list(shape)} from action_mask)")
    return [text for item in texts for text in _flatten(item, shape[1:], name)]


def _flatten_inputs(prompt, actions, action_mask: Tensor):
    """Check shapes against the action mask [*B, A]; return flat lists, mask [B', A], batch shape."""
    if not isinstance(action_mask, Tensor) or action_mask.ndim < 1:
        raise ValueError("action_mask must be a bool tensor of shape [*batch, num_candidates]")
    prompt, actions = _as_python(prompt), _as_python(actions)
    batch_shape, num_candidates = tuple(action_mask.shape[:-1]), action_mask.shape[-1]
    if num_candidates == 0:
        raise ValueError("there must be at least one candidate action")
    # Name the mismatch the caller most likely made: prompts vs candidates, then candidates vs mask.
    prompt_count = 1 if isinstance(prompt, str) else len(prompt)
    action_count = len(actions) if not isinstance(actions, str) else 0
    if batch_shape and prompt_count != action_count:
        raise ValueError(f"prompt batch of size {prompt_count} but candidate batch of size {action_count}")
    flat_actions = _flatten(actions, (*batch_shape, num_candidates), "actions")
    flat_prompts = _flatten(prompt, batch_shape, "prompt")
    candidates = [flat_actions[i:i + num_candidates] for i in range(0, len(flat_actions), num_candidates)]
    return flat_prompts, candidates, action_mask.reshape(-1, num_candidates).bool(), batch_shape


# ---------------------------------------------------------------------- factory
def make_scorer(
    llm: LoadedLLM | LLMConfig | str | None = None,
    normalization: Normalization = "sum",
    shared_prefix: bool = True,
    tokenization: Tokenization = "exact",
    in_keys: Sequence[str] = (PROMPT_KEY, ACTIONS_KEY, ACTION_MASK_KEY),
    out_keys: Sequence[str] = (SCORES_KEY, ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY),
):
    """A ``TensorDictModule`` wrapping :class:`LLMScorer`.

    Reads ``"prompt"``, ``"actions"``, ``"action_mask"``; writes ``"action_scores"`` [*B, A],
    ``"action_hidden"`` [*B, A, H], ``"prompt_hidden"`` [*B, H]. ``llm`` is a loaded model, an
    :class:`LLMConfig`, a model name/path, or ``None`` for the offline tiny T5. The scorer itself is
    ``module.module`` (its ``.model`` holds the LLM parameters to optimise).
    """
    from tensordict.nn import TensorDictModule

    if not isinstance(llm, LoadedLLM):
        llm = load_llm(llm if isinstance(llm, LLMConfig) else LLMConfig(name_or_path=llm))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder,
                       normalization=normalization, shared_prefix=shared_prefix,
                       tokenization=tokenization)
    return TensorDictModule(scorer, in_keys=list(in_keys), out_keys=list(out_keys))
