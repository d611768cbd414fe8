"""Groups of prompts of similar length, scored apart, so that a batch's self-attention is neither
spent on padding nor larger than the CPU's caches.

A batch is padded to its longest prompt, and self-attention costs the square of that length for
every prompt: with TextWorld's or BabyAI-Text's prompts (two past observations, 60 to 240 tokens),
a third of the tokens of a batch of 128 are padding, and its [128, heads, L, L] score tensors
(~120 MB in float32 at L = 240) stream through memory at each of the attention's passes. Sorted by
length and cut into groups whose score tensors stay small, each group padded to its own longest
prompt, the same update of ``cpu_textworld_coin_collector`` ran 2x faster on one CPU core
(``experiments/loop_speed/length_groups``). A prompt's scores do not depend on the other prompts
of its batch nor on its padding (padded keys weigh exactly 0), so the results are those of one
batch up to the order of floating-point sums (~1e-7).

On a GPU a batch is one group: large batches are what keep it busy (not measured here).
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchrl_glam.modules.token_log_probs import PerToken
from torchrl_glam.modules.tokenisation import Tokenised

#: on the CPU, the most (query, key) token pairs of one group's self-attention per head: 2**19,
#: e.g. 9 prompts of 240 tokens or 128 of 64 (one group: a Playground-Text batch is never cut);
#: 8 to 16 prompts of TextWorld's longest were fastest (the experiment above)
CPU_GROUP_TOKEN_PAIRS = 1 << 19


def length_groups(lengths: Tensor, max_token_pairs: int | None) -> list[Tensor]:
    """Indices of the prompts of ``lengths`` [B], longest first, in consecutive groups of at most
    ``max_token_pairs`` = (prompts in the group) x (its longest prompt's length)² (at least one
    prompt each); one group, in the batch's order, when that holds for the whole batch or
    ``max_token_pairs`` is ``None``.

    Examples:
        >>> import torch
        >>> from torchrl_glam.modules.length_groups import length_groups
        >>> [group.tolist() for group in length_groups(torch.tensor([3, 10, 4, 9]), 200)]
        [[1, 3], [2, 0]]
        >>> [group.tolist() for group in length_groups(torch.tensor([3, 10, 4, 9]), None)]
        [[0, 1, 2, 3]]
    """
    count = len(lengths)
    longest = int(lengths.max()) if count else 0
    if max_token_pairs is None or count * longest * longest <= max_token_pairs:
        return [torch.arange(count, device=lengths.device)]
    order = lengths.argsort(descending=True, stable=True)
    sizes, start, ordered = [], 0, lengths[order].tolist()
    while start < count:
        size = max(1, max_token_pairs // max(ordered[start] ** 2, 1))
        sizes.append(min(size, count - start))
        start += sizes[-1]
    return list(order.split(sizes))


def select_prompts(batch: Tokenised, rows: Tensor, left_padded: bool) -> Tokenised:
    """The prompts ``rows`` of ``batch`` and their candidates, padded to the longest of them."""
    prompt_mask = batch.prompt_mask[rows]
    width = max(int(prompt_mask.sum(1).max()), 1)
    columns = slice(prompt_mask.shape[1] - width, None) if left_padded else slice(0, width)
    candidates = candidate_rows(rows, batch.num_candidates)
    return Tokenised(
        prompt_ids=batch.prompt_ids[rows, columns],
        prompt_mask=prompt_mask[:, columns],
        action_ids=batch.action_ids[candidates],
        action_lengths=batch.action_lengths[candidates],
        num_candidates=batch.num_candidates,
    )


def candidate_rows(rows: Tensor, num_candidates: int) -> Tensor:
    """The rows [len(rows) * A] of the candidates of prompts ``rows`` in a batch's [B * A] layout."""
    return (rows[:, None] * num_candidates + torch.arange(num_candidates, device=rows.device)).flatten()


def gather_groups(parts: list[PerToken], groups: list[Tensor], num_candidates: int) -> PerToken:
    """The groups' results back in the batch's order (gradients flow through)."""
    if len(parts) == 1:
        return parts[0]
    rows = torch.cat(groups)
    prompt_place = torch.empty_like(rows)
    prompt_place[rows] = torch.arange(len(rows), device=rows.device)
    candidate_place = candidate_rows(prompt_place, num_candidates)
    return PerToken(
        torch.cat([p.token_logp for p in parts])[candidate_place],  # the groups keep the batch's [., La]
        torch.cat([p.action_hidden for p in parts])[candidate_place],
        torch.cat([p.prompt_hidden for p in parts])[prompt_place],
    )
