"""The scorer's speed-ups change no number: the candidates' prefix tree in one decoder call
(modules/attention.py) and the fused GELU equal transformers' own eager computation."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM
from transformers.models.t5.modeling_t5 import eager_attention_forward

from torchrl_glam.modules import LLMScorer
from torchrl_glam.modules.attention import (
    TREE_POSITION_BIAS,
    routes_through_attention_interface,
    tree_attention,
    use_tree_attention,
)


class _Module(torch.nn.Module):
    def __init__(self, is_causal=False):
        super().__init__()
        self.is_causal = is_causal


def test_the_tree_bias_replaces_the_position_bias_in_the_decoder_self_attention_only():
    torch.manual_seed(0)
    query, key, value = (torch.randn(3, 2, 4, 8) for _ in range(3))
    position_bias, tree_bias, mask = torch.randn(1, 2, 4, 4), torch.randn(1, 2, 4, 4), torch.zeros(3, 1, 4, 4)
    mask[1, ..., 0] = torch.finfo(torch.float32).min
    for module, used in ((_Module(is_causal=True), tree_bias), (_Module(is_causal=False), position_bias)):
        ours, _ = tree_attention(
            module, query, key, value, mask, scaling=1.0, position_bias=position_bias, **{TREE_POSITION_BIAS: tree_bias}
        )
        expected, _ = eager_attention_forward(module, query, key, value, mask, scaling=1.0, position_bias=used)
        torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-5)


def test_self_attention_path_equals_transformers_eager():
    torch.manual_seed(1)
    query, key, value = (torch.randn(6, 2, 5, 8) for _ in range(3))
    bias, mask = torch.randn(1, 2, 5, 5), torch.zeros(6, 1, 5, 5)
    mask[2, ..., :2] = torch.finfo(torch.float32).min
    module = _Module()
    for scaling in (1.0, 0.3):
        ours, _ = tree_attention(module, query, key, value, mask, scaling=scaling, position_bias=bias)
        expected, _ = eager_attention_forward(module, query, key, value, mask, scaling=scaling, position_bias=bias)
        torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-5)


def test_scorer_equals_the_unmodified_transformers_model(tiny_paths, make_scorer_for, playground_batch):
    """Scores, hidden states and gradients of the scorer (prefix tree, fused GELU) equal
    those of the same weights in transformers' own T5 (eager attention, "gelu_new"), pair by pair."""
    scorer = make_scorer_for(tiny_paths["t5"])
    reference_model = AutoModelForSeq2SeqLM.from_pretrained(tiny_paths["t5"], attn_implementation="eager")
    assert reference_model.config.dense_act_fn == "gelu_new"
    reference = LLMScorer(reference_model, scorer.tokenizer, True, shared_prefix=False)
    prompts, actions, mask = playground_batch(4, 3, seed=2, uneven=True)
    mask[1, 0] = False
    outputs, gradients = [], []
    for model, method in ((scorer.model, scorer), (reference_model, reference.naive)):
        model.zero_grad()
        out = method(prompts, actions, mask)
        (out[0].sum() + out[1].pow(2).mean() + out[2].pow(2).mean()).backward()
        outputs.append(out)
        gradients.append({name: p.grad for name, p in model.named_parameters() if p.grad is not None})
    for ours, theirs in zip(*outputs):
        torch.testing.assert_close(ours, theirs.detach(), atol=1e-5, rtol=1e-5)
    assert gradients[0].keys() == gradients[1].keys()
    for name, grad in gradients[0].items():
        torch.testing.assert_close(grad, gradients[1][name], atol=1e-4, rtol=1e-4)


def test_routes_through_attention_interface_reads_the_installed_transformers():
    assert routes_through_attention_interface("t5")  # the transformers these tests run with
    assert not routes_through_attention_interface("no_such_model_type")


@pytest.mark.parametrize("without", ["model_type", "attention_interface"])
def test_without_the_tree_attention_the_cache_is_repeated_and_scores_the_same(
    without, tiny_paths, make_scorer_for, playground_batch, monkeypatch
):
    """A model type without the tree attention (here: T5 taken off the list), or a transformers
    whose T5 runs its own eager attention (before transformers#47014, which would ignore the tree's
    position bias without an error), keeps the cache repeated per candidate: scores equal the
    naive pairs'."""
    if without == "model_type":
        monkeypatch.setattr("torchrl_glam.modules.attention.TREE_ATTENTION_MODEL_TYPES", ())
    else:
        monkeypatch.setattr(
            "torchrl_glam.modules.attention.routes_through_attention_interface", lambda model_type: False
        )
    scorer = make_scorer_for(tiny_paths["t5"])
    assert not use_tree_attention(scorer.model)
    prompts, actions, mask = playground_batch(3, 3, seed=3, uneven=True)
    with torch.no_grad():
        shared, naive = scorer(prompts, actions, mask), scorer.naive(prompts, actions, mask)
    for ours, theirs in zip(shared, naive):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_each_distinct_prefix_of_a_prompts_candidates_runs_once(tiny_paths, make_scorer_for, playground_batch):
    """The decoder runs a prompt's candidates as a prefix tree in one call: "Go", "Go to" and each
    "Go to <colour>" once, however many candidates share them; a repeated candidate costs nothing
    more and gets the same score; scores, hidden states and gradients equal the naive pairs'."""
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, _, _ = playground_batch(3, 3, seed=4, uneven=True)
    actions = [["Go to red cat", "Go to red lion", "Go to blue cat", "Grasp", "Release", "Go to red cat"]] * 3
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 2] = False
    decoder_tokens = []
    hook = scorer.model.get_decoder().register_forward_pre_hook(
        lambda module, args, kwargs: decoder_tokens.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    try:
        outputs, gradients = [], []
        for method in (scorer, scorer.naive):
            scorer.zero_grad()
            decoder_tokens.clear()
            out = method(prompts, actions, mask)
            (out[0].sum() + out[1].pow(2).mean() + out[2].pow(2).mean()).backward()
            outputs.append(out)
            gradients.append([p.grad.clone() for p in scorer.parameters() if p.grad is not None])
            if method is scorer:
                tree_tokens = list(decoder_tokens)
    finally:
        hook.remove()
    # per prompt, one sequence: start; go, grasp, release; go to; go to red, go to blue; the three
    # whole "Go to" candidates
    assert tree_tokens == [3 * (1 + 3 + 1 + 2 + 3)]
    assert torch.equal(outputs[0][0][:, 0], outputs[0][0][:, 5])
    for ours, theirs in zip(*outputs):
        torch.testing.assert_close(ours, theirs.detach(), atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(*gradients):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
