"""A prompt's candidate actions as a prefix tree, and the tree as one sequence per prompt.

Each distinct prefix of a prompt's candidates is one node (on the full task set the six "Go to
<colour> <type>" share "Go" and "Go to"); a model runs every node once, as one token of the
prompt's sequence, attending to its ancestors only (``seq2seq_scoring`` for T5, ``causal_scoring``
for decoder-only models). The root (level 0) is the token that predicts every candidate's first
token: the decoder's start token, or the prompt's last token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class PrefixTree:
    """The candidates of each prompt as a prefix tree, level by level (see :func:`prefix_tree`).

    The nodes are stacked level after level: level 0 is the root (one row per
    prompt), level d has ``B * K_d`` rows, the prefixes of length d of prompt b's candidates in rows
    ``b * K_d ...``, padded to the widest prompt's K_d with copies that nobody reads."""

    tokens: list[Tensor]  # level d (1 to the longest candidate): [B*K_d] the last token of each prefix
    parents: list[Tensor]  # level d: [B*K_d] the row of its parent within level d-1
    predictors: Tensor  # [B*A, La] stacked row whose logits predict candidate token t (prefix of length t)
    last: Tensor  # [B*A] stacked row of each candidate's last token (the whole candidate)


def prefix_tree(action_ids: Tensor, lengths: Tensor, num_candidates: int) -> PrefixTree:
    """The prefix tree of ``action_ids`` [B*A, La] (``lengths`` real tokens each), in a few tensor
    operations per level (a batch has B*A = 1,024 candidates on the CPU preset)."""
    rows, width = action_ids.shape
    prompts = rows // num_candidates
    prompt_of = torch.arange(rows, device=action_ids.device) // num_candidates
    row = prompt_of  # each candidate's prefix at the current level, as a stacked row (level 0: start)
    level_start, level_width, offset = 0, 1, prompts  # the previous level's first row and K; the next free row
    vocabulary = int(action_ids.max()) + 1
    predictors, tokens, parents, last = [row], [], [], row
    # a length group's candidates may all be shorter than the batch's width: levels end with its longest
    for depth in range(1, int(lengths.max()) + 1):
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
    predictors += [prompt_of] * (width - len(predictors))  # columns of padding only, which no token reads
    return PrefixTree(tokens, parents, torch.stack(predictors, 1), last)


@dataclass
class TreeLayout:
    """A :class:`PrefixTree` as one decoder sequence per prompt: slot 0 the start token, then the
    nodes of level 1, of level 2, ... (``S`` slots: 1 + the sum of the levels' widths K_d)."""

    input_ids: Tensor  # [B, S] each slot's token
    depth: Tensor  # [S] each slot's level (its position in its own prefix)
    ancestors: Tensor  # [B, S, S] bool: slot j is slot i or one of its ancestors
    node: Tensor  # [B*S'] the flat slot (b * S + slot) of each stacked row of the tree, in its order


def tree_layout(tree: PrefixTree, prompts: int, start_id: int) -> TreeLayout:
    """Where each node of ``tree`` (over ``prompts`` prompts) sits in its prompt's decoder
    sequence (see :class:`TreeLayout`)."""
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
    depth = torch.cat([torch.full((w,), d, dtype=torch.long, device=device) for d, w in enumerate([1, *widths])])
    ancestors = torch.eye(slots, dtype=torch.bool, device=device).expand(prompts, slots, slots).clone()
    current = torch.arange(slots, device=device).expand(prompts, slots)
    for _ in widths:
        current = parent_slot.gather(1, current)
        ancestors.scatter_(2, current[..., None], True)
    return TreeLayout(torch.cat(columns, 1), depth, ancestors, torch.cat(node))
