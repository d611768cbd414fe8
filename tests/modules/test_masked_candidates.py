"""Masked candidates are not scored: the legal candidates' scores and hidden states are those of
scoring every slot, the masked ones' are 0, and the prefix tree the decoder runs holds the legal
candidates' tokens only (issue 84: cooking has 64 slots and ~14 legal)."""

import torch

from torchrl_glam.modules.prefix_tree import prefix_tree
from torchrl_glam.modules.tokenisation import legal_candidates_only


def test_legal_candidates_score_as_when_every_slot_is_scored_and_masked_ones_are_zero(
    tiny_paths, kind, make_scorer_for, playground_batch
):
    scorer = make_scorer_for(tiny_paths[kind])
    prompts, candidates, every = playground_batch(4, 5, seed=1, uneven=True)
    mask = every.clone()
    mask[0, [1, 3]] = mask[2, 0] = mask[3, 6] = False
    with torch.no_grad():
        all_scores, all_hidden, all_prompt = scorer(prompts, candidates, every)
        scores, hidden, prompt_hidden = scorer(prompts, candidates, mask)
    torch.testing.assert_close(scores[mask], all_scores[mask], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(hidden[mask], all_hidden[mask], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(prompt_hidden, all_prompt, rtol=1e-5, atol=1e-6)
    assert bool((scores[~mask] == 0).all()) and bool((hidden[~mask] == 0).all())


def test_the_decoders_prefix_tree_holds_only_the_legal_candidates(tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, candidates, every = playground_batch(3, 6, seed=2)
    mask = torch.zeros_like(every)
    mask[:, 0] = True  # one legal candidate per prompt: "Go to <its first object>"
    batch = scorer._tokenise(prompts, candidates, mask, left_pad_prompts=False, device=torch.device("cpu"))
    legal = legal_candidates_only(batch, mask)
    slots = batch.num_candidates

    def nodes(action_ids, lengths, num_candidates):
        return sum(len(level) for level in prefix_tree(action_ids, lengths, num_candidates).tokens)

    legal_alone = nodes(batch.action_ids[::slots], batch.action_lengths[::slots], 1)
    assert nodes(legal.action_ids, legal.action_lengths, slots) == legal_alone
    assert nodes(batch.action_ids, batch.action_lengths, slots) > legal_alone
