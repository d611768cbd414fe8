"""Prompts scored in groups of similar length (``modules/length_groups.py``) give what the whole
batch gives, in the batch's order: scores, both hidden states and their gradients, on every scoring
path (encoder-decoder tree, decoder-only tree, naive pairs)."""

import pytest
import torch

from torchrl_glam.modules.length_groups import length_groups


def _uneven_batch(playground_batch):
    prompts, candidates, mask = playground_batch(6, 4, seed=3, uneven=True)
    # prompts of very different lengths, the longest not first, and some masked candidates
    prompts = [
        p if i % 3 else p.replace("You see:", "You see, far away and near:" * (i + 1)) for i, p in enumerate(prompts)
    ]
    mask[1, 2] = mask[4, 0] = False
    return prompts, candidates, mask


def _outputs_and_gradients(scorer, prompts, candidates, mask, naive):
    scorer.model.zero_grad(set_to_none=True)
    outputs = (scorer.naive if naive else scorer)(prompts, candidates, mask)
    weights = [torch.randn(out.shape, generator=torch.Generator().manual_seed(i)) for i, out in enumerate(outputs)]
    sum((w * out).sum() for w, out in zip(weights, outputs)).backward()
    grads = {n: p.grad.clone() for n, p in scorer.model.named_parameters() if p.grad is not None}
    return [out.detach() for out in outputs], grads


def _assert_groups_give_the_whole_batchs(scorer, prompts, candidates, mask, naive):
    lengths = torch.tensor([len(ids) for ids in scorer.tokenizer(prompts)["input_ids"]])
    scorer.group_token_pairs = int(lengths.max()) ** 2  # the longest prompt alone
    assert len(length_groups(lengths, scorer.group_token_pairs)) >= 3
    grouped, grouped_grads = _outputs_and_gradients(scorer, prompts, candidates, mask, naive)
    scorer.group_token_pairs = None
    whole, whole_grads = _outputs_and_gradients(scorer, prompts, candidates, mask, naive)
    for got, expected, name in zip(grouped, whole, ("scores", "action_hidden", "prompt_hidden")):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, msg=name)
    assert grouped_grads.keys() == whole_grads.keys() and whole_grads
    for name, grad in whole_grads.items():
        # sums over many positions (the embeddings' rows): to 1e-5 of the tensor's largest value
        scale = float(grad.abs().max())
        torch.testing.assert_close(grouped_grads[name], grad, rtol=0, atol=1e-5 * max(scale, 1.0), msg=name)


@pytest.mark.parametrize("naive", [False, True], ids=["shared-prefix", "naive"])
def test_groups_give_the_whole_batchs_scores_hidden_states_and_gradients(
    tiny_paths, kind, make_scorer_for, playground_batch, naive
):
    scorer = make_scorer_for(tiny_paths[kind])
    _assert_groups_give_the_whole_batchs(scorer, *_uneven_batch(playground_batch), naive)


@pytest.mark.parametrize("naive", [False, True], ids=["shared-prefix", "naive"])
def test_a_group_whose_candidates_are_all_shorter_than_the_batchs_longest(
    tiny_paths, kind, make_scorer_for, playground_batch, naive
):
    # TextWorld's treasure hunter: one state's commands name a long object ("take the Quote of the
    # Day Calendar"); a length group without that state has no candidate as long as the batch's width
    scorer = make_scorer_for(tiny_paths[kind])
    prompts, candidates, mask = _uneven_batch(playground_batch)
    candidates[1][1] += " with the Quote of the Day Calendar, slowly and then once again"
    _assert_groups_give_the_whole_batchs(scorer, prompts, candidates, mask, naive)


def test_groups_are_longest_first_within_the_budget_and_one_when_it_fits():
    lengths = torch.tensor([5, 30, 12, 30, 7, 20])
    groups = length_groups(lengths, 2_000)  # 2 prompts of 30 (1,800), then 5 of 20 or less (2,000)
    assert [g.tolist() for g in groups] == [[1, 3], [5, 2, 4, 0]]
    assert [g.tolist() for g in length_groups(lengths, 6 * 30 * 30)] == [[0, 1, 2, 3, 4, 5]]
    assert [g.tolist() for g in length_groups(lengths, 100)] == [[1], [3], [5], [2], [4, 0]]  # 100 // 7² = 2
