"""Prompts and candidate actions to padded token ids, the way lm-evaluation-harness scores a
continuation (``"exact"``) or the way Lamorel does (``"separate"``); see ``modules/scoring.py``."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor


@dataclass
class Tokenised:
    prompt_ids: Tensor  # [B, Lp] padded (left for decoder-only prefixes, right otherwise)
    prompt_mask: Tensor  # [B, Lp] 1 on real tokens
    action_ids: Tensor  # [B*A, La] right-padded
    action_lengths: Tensor  # [B*A] number of real tokens (>= 1)
    num_candidates: int  # A


#: (prompt, candidates) pairs a decoder-only tokeniser keeps: a Table 3 replay's 100k transitions'
#: prompts and their next ones (~1.7 KB each with SmolLM2's tokenizer)
DEFAULT_PAIR_CACHE_SIZE = 1 << 17


class CandidateTokeniser:
    """Tokenises a batch of prompts and their candidates into a :class:`Tokenised` batch.

    Args:
        tokenizer (PreTrainedTokenizerBase): the LLM's tokenizer (its pad token is set to EOS where it has none).
        is_encoder_decoder (bool): the candidate is then tokenised alone (a new decoder sequence).
        tokenization (str): ``"exact"`` or ``"separate"`` (see ``modules/scoring.py``).
        pair_cache_size (int): decoder-only ``"exact"`` tokenisation keeps the token ids of this many
            recently scored (prompt, candidates) pairs (0: none).
    """

    def __init__(
        self, tokenizer, is_encoder_decoder: bool, tokenization: str, pair_cache_size: int = DEFAULT_PAIR_CACHE_SIZE
    ):
        self.tokenizer = tokenizer
        self.is_encoder_decoder = is_encoder_decoder
        self.tokenization = tokenization
        if tokenizer.pad_token_id is None:  # e.g. Llama: padding needs some id; its value is masked
            tokenizer.pad_token = tokenizer.eos_token
        self.pad_id = tokenizer.pad_token_id
        # Candidate texts repeat across steps and environments (N+2 texts from a small vocabulary):
        # each is tokenised once.
        self.candidate_ids: dict[str, tuple[int, ...]] = {}
        # Decoder-only exact tokenisation encodes the prompt once per candidate (~150 ms per 256
        # full-set SmolLM2 prompts on one core, the GPU update's CPU cost), and every replayed
        # prompt was tokenised when it was acted on: the pairs are memoised, least recently used
        # dropped. The key holds the texts, so a hit is the same tokenisation.
        self.pair_cache_size = pair_cache_size
        self._pairs: OrderedDict[tuple[str, tuple[str, ...]], tuple[array, tuple[tuple[int, ...], ...]]] = OrderedDict()
        self._rows: dict[tuple[int, ...], tuple[int, ...]] = {}  # candidate rows, shared by the pairs

    def __call__(
        self,
        prompts: list[str],
        candidates: list[list[str]],
        mask: Tensor,
        left_pad_prompts: bool,
        device: torch.device,
    ) -> Tokenised:
        if self.tokenization == "exact":
            return self._exact(prompts, candidates, mask, left_pad_prompts, device)
        prompt_rows = self.encode(prompts)
        action_rows = self.alone([text for row in candidates for text in row])
        return self._pack(prompt_rows, action_rows, mask, len(candidates[0]), left_pad_prompts, device)

    def _exact(
        self,
        prompts: list[str],
        candidates: list[list[str]],
        mask: Tensor,
        left_pad_prompts: bool,
        device: torch.device,
    ) -> Tokenised:
        """lm-evaluation-harness's ``_encode_pair``, batched (see ``modules/scoring.py``)."""
        num_candidates = len(candidates[0])
        contexts = [prompt.rstrip() for prompt in prompts]
        moved = [prompt[len(context) :] for prompt, context in zip(prompts, contexts)]
        continuations = [tuple(space + text for text in row) for space, row in zip(moved, candidates)]
        if self.is_encoder_decoder:
            # The decoder starts a new sequence: the continuation is tokenised alone (the harness's
            # seq2seq rule), without special tokens.
            context_ids = self._contexts(prompts, contexts)
            action_rows = self.alone([text for row in continuations for text in row])
        else:
            keys = list(zip(contexts, continuations))
            missing = [i for i, key in enumerate(keys) if key not in self._pairs]
            if missing:
                self._remember(
                    [keys[i] for i in missing],
                    *self._encode_pairs(
                        [prompts[i] for i in missing],
                        [contexts[i] for i in missing],
                        [continuations[i] for i in missing],
                    ),
                )
            pairs = [self._pairs[key] for key in keys]
            for key in keys:
                self._pairs.move_to_end(key)
            self._forget()
            context_ids = [pair[0] for pair in pairs]
            action_rows = [row for pair in pairs for row in pair[1]]
        return self._pack(context_ids, action_rows, mask, num_candidates, left_pad_prompts, device)

    def _contexts(self, prompts: list[str], contexts: list[str]) -> list[list[int]]:
        context_ids = self.encode(contexts)
        for prompt, ids in zip(prompts, context_ids):
            if not ids:
                raise ValueError(
                    f"the prompt {prompt!r} has no tokens once its trailing whitespace "
                    "moves to the candidates; give a prompt with some text"
                )
        return context_ids

    def _encode_pairs(
        self, prompts: list[str], contexts: list[str], continuations: list[tuple[str, ...]]
    ) -> tuple[list[list[int]], list[list[Sequence[int]]]]:
        """Decoder-only: the whole text once; the candidate's tokens are those after the context's
        own tokenisation. Where a merge crosses the boundary (the whole text's tokens do not start
        with the context's), the harness would drop the merged characters from the continuation;
        the continuation is then tokenised alone instead, so that context + continuation tokens
        still spell exactly prompt + candidate."""
        context_ids = self._contexts(prompts, contexts)
        flat = [(b, text) for b, row in enumerate(continuations) for text in row]
        wholes = self.encode([contexts[b] + text for b, text in flat])
        action_rows: list[Sequence[int] | None] = [None] * len(wholes)
        crossing = []
        for i, (whole, (b, _)) in enumerate(zip(wholes, flat)):
            context = context_ids[b]
            if whole[: len(context)] == context:
                action_rows[i] = whole[len(context) :]
            else:
                crossing.append(i)
        if crossing:
            for i, row in zip(crossing, self.alone([flat[i][1] for i in crossing])):
                action_rows[i] = row
        rows_of, start = [], 0
        for row in continuations:
            rows_of.append(action_rows[start : start + len(row)])
            start += len(row)
        return context_ids, rows_of

    def _remember(self, keys: list, context_ids: list[list[int]], rows_of: list[list[Sequence[int]]]) -> None:
        """Stores the pairs compactly: the context's ids as a C array, each candidate row once."""
        if len(self._rows) > 100_000:  # open-ended action texts: do not grow forever
            self._rows.clear()
        for key, ids, rows in zip(keys, context_ids, rows_of):
            rows = tuple(self._rows.setdefault(tuple(row), tuple(row)) for row in rows)
            self._pairs[key] = (array("l", ids), rows)

    def _forget(self) -> None:
        """Drops the least recently used pairs beyond the cache's size (the batch at hand has its ids already)."""
        while len(self._pairs) > self.pair_cache_size:
            self._pairs.popitem(last=False)

    def alone(self, texts: list[str]) -> list[tuple[int, ...]]:
        """Each text tokenised on its own, without special tokens (cached: candidates repeat)."""
        missing = [text for text in dict.fromkeys(texts) if text not in self.candidate_ids]
        if missing:
            if len(self.candidate_ids) > 100_000:  # open-ended action texts: do not grow forever
                self.candidate_ids.clear()
            rows = self.encode(missing, add_special_tokens=False)
            self.candidate_ids.update({text: tuple(row) for text, row in zip(missing, rows)})
        return [self.candidate_ids[text] for text in texts]

    def encode(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """``tokenizer(texts, add_special_tokens=...)["input_ids"]``. A fast tokenizer that pads and
        truncates nothing itself is asked directly, through the tokenizers library's
        ``encode_batch_fast``: the same ids, without the character offsets that transformers' call
        has computed and then dropped (about 30% faster on full-set prompts)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        encode = getattr(backend, "encode_batch_fast", None)
        if encode is None or backend.padding is not None or backend.truncation is not None:
            return self.tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]
        return [encoding.ids for encoding in encode(texts, add_special_tokens=add_special_tokens)]

    def _pack(
        self,
        prompt_rows: list[list[int]],
        action_rows: list[Sequence[int]],
        mask: Tensor,
        num_candidates: int,
        left_pad_prompts: bool,
        device: torch.device,
    ) -> Tokenised:
        """Pads token lists into a :class:`Tokenised` batch."""
        prompt_ids, prompt_mask = pad_rows(prompt_rows, self.pad_id, left=left_pad_prompts)
        # A batch's B*A candidates are a few distinct token rows (N+2 texts per prompt from a small
        # vocabulary): each distinct row is padded once and the batch indexes them.
        rows = [tuple(row) for row in action_rows]
        position = {row: index for index, row in enumerate(dict.fromkeys(rows))}
        table, table_mask = pad_rows(list(position), self.pad_id)
        index = torch.tensor([position[row] for row in rows])
        action_lengths = _checked_action_lengths(table_mask.sum(-1)[index], mask)
        return Tokenised(
            prompt_ids=prompt_ids.to(device),
            prompt_mask=prompt_mask.to(device),
            action_ids=table[index].to(device),
            action_lengths=action_lengths.to(device),
            num_candidates=num_candidates,
        )


def legal_candidates_only(batch: Tokenised, mask: Tensor) -> Tokenised:
    """``batch`` with each masked candidate's tokens replaced by its prompt's first legal candidate's:
    the prefix-tree paths run each distinct token row of a prompt once, so masked candidates cost no
    compute there (the scorer then sets their outputs to 0). A prompt with no legal candidate keeps
    its own rows."""
    prompts, num_candidates = mask.shape
    slots = torch.arange(num_candidates, device=mask.device)
    first_legal = mask.int().argmax(1, keepdim=True)  # 0 where none is legal
    source = torch.where(mask | ~mask.any(1, keepdim=True), slots, first_legal)
    rows = (torch.arange(prompts, device=mask.device)[:, None] * num_candidates + source).flatten()
    rows = rows.to(batch.action_ids.device)
    return replace(batch, action_ids=batch.action_ids[rows], action_lengths=batch.action_lengths[rows])


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int, left: bool = False) -> tuple[Tensor, Tensor]:
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


def _checked_action_lengths(action_lengths: Tensor, mask: Tensor) -> Tensor:
    """Candidates' token counts, an empty candidate counted as one pad token (then masked out);
    an empty *legal* candidate is an error."""
    empty = action_lengths == 0
    if empty.any():
        if (empty & mask.reshape(-1).cpu()).any():
            raise ValueError(
                "a legal (unmasked) candidate action has no tokens; empty action texts "
                "are only allowed for masked candidates"
            )
        action_lengths = action_lengths.clamp(min=1)
    return action_lengths
