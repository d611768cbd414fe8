"""Shared-prefix scoring equals naive per-pair scoring and an independent reference; input checks."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_glam.modules import make_actor, make_scorer
from torchrl_glam.modules.loading import LLMConfig

TOL = 1e-5


def uneven_inputs(playground_batch):
    """Prompts of different lengths, actions of 1 to 5 words, some candidates masked."""
    prompts, actions, mask = playground_batch(3, 4, seed=1, uneven=True)
    actions[1][2] = "Go to red living_thing"  # 4 words
    actions[2][0] = "Go to blue cat green"  # 5 words
    mask[0, 1] = False
    mask[2, 4] = False
    return prompts, actions, mask


def assert_close(left, right):
    for a, b in zip(left, right):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() < TOL


@pytest.mark.parametrize("normalization", ["sum", "mean"])
def test_shared_prefix_equals_naive(kind, tiny_paths, make_scorer_for, playground_batch, normalization):
    scorer = make_scorer_for(tiny_paths[kind], normalization=normalization)
    prompts, actions, mask = uneven_inputs(playground_batch)
    with torch.no_grad():
        shared, naive = scorer(prompts, actions, mask), scorer.naive(prompts, actions, mask)
    assert shared[0].shape == (3, 6) and shared[1].shape == (3, 6, 64) and shared[2].shape == (3, 64)
    assert_close(shared, naive)
    # the prompt paddings differ between rows; without equal prompts the check above would be weak
    assert len({len(p) for p in prompts}) > 1


def test_scores_match_an_independent_reference(kind, tiny_paths, make_scorer_for, playground_batch):
    """Sum of token log-probs computed by hand, one (prompt, action) pair at a time."""
    scorer = make_scorer_for(tiny_paths[kind])
    prompts, actions, mask = uneven_inputs(playground_batch)
    model, tokenizer = scorer.model, scorer.tokenizer
    with torch.no_grad():
        scores = scorer(prompts, actions, mask)[0]
        for b, a in [(0, 0), (1, 2), (2, 0), (2, 5)]:
            prompt_ids = torch.tensor([tokenizer(prompts[b])["input_ids"]])
            action_ids = torch.tensor([tokenizer(actions[b][a], add_special_tokens=False)["input_ids"]])
            if kind == "t5":
                start = torch.tensor([[model.config.decoder_start_token_id]])
                logits = model(input_ids=prompt_ids, decoder_input_ids=torch.cat([start, action_ids], 1)[:, :-1]).logits
            else:
                logits = model(input_ids=torch.cat([prompt_ids, action_ids], 1)).logits[:, prompt_ids.shape[1] - 1 : -1]
            expected = logits.log_softmax(-1).gather(2, action_ids[..., None]).sum()
            assert abs(scores[b, a].item() - expected.item()) < TOL


def test_mean_normalisation_divides_by_token_count(tiny_paths, make_scorer_for, playground_batch):
    prompts, actions, mask = playground_batch(2, 3)
    with torch.no_grad():
        summed = make_scorer_for(tiny_paths["t5"])(prompts, actions, mask)[0]
        mean = make_scorer_for(tiny_paths["t5"], normalization="mean")(prompts, actions, mask)[0]
    lengths = torch.tensor([4.0, 4.0, 4.0, 1.0, 1.0])  # "Go to <colour> <type>", "Grasp", "Release"
    torch.testing.assert_close(mean, summed / lengths)


def test_gradient_checkpointing_path_equals_naive(kind, tiny_paths, make_scorer_for, playground_batch):
    """Training with checkpointing drops KV caches: the fallback path must give the same values."""
    scorer = make_scorer_for(tiny_paths[kind], gradient_checkpointing=True)
    prompts, actions, mask = uneven_inputs(playground_batch)
    checkpointed = scorer(prompts, actions, mask)
    checkpointed[0].sum().backward()  # recomputation in backward works
    with torch.no_grad():
        assert_close(checkpointed, scorer.naive(prompts, actions, mask))


def test_shared_prefix_gradients_equal_naive(kind, tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths[kind], lora_rank=4)
    prompts, actions, mask = uneven_inputs(playground_batch)
    gradients = []
    for method in (scorer, scorer.naive):
        scorer.zero_grad()
        scores, action_hidden, _ = method(prompts, actions, mask)
        (scores.sum() + action_hidden.square().sum()).backward()
        gradients.append([p.grad.clone() for n, p in scorer.named_parameters() if "lora_B" in n])
    for shared, naive in zip(*gradients):
        torch.testing.assert_close(shared, naive, atol=1e-4, rtol=1e-4)


def test_tensordict_module_and_masked_candidates(kind, tiny_paths, playground_batch):
    prompts, actions, mask = uneven_inputs(playground_batch)
    scorer = make_scorer(LLMConfig(str(tiny_paths[kind])))
    actor = make_actor(return_log_prob=True)
    td = TensorDict(batch_size=[3])
    td.set("prompt", prompts)  # stored as NonTensorStack, like the environment's keys
    td.set("actions", actions)
    td.set("action_mask", mask)
    with torch.no_grad():
        actor(scorer(td))
    assert td["action_scores"].shape == (3, 6) and td["action_hidden"].shape == (3, 6, 64)
    probs = actor.get_dist(td).probs
    assert (probs[~mask] == 0).all() and (probs[mask] > 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))
    assert torch.isfinite(td["sample_log_prob"] if "sample_log_prob" in td.keys() else td["action_log_prob"]).all()
    for _ in range(20):  # sampled actions are always legal
        actor(td)
        assert mask.gather(1, td["action"][:, None]).all()


def test_unbatched_and_multi_dim_batches(tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, actions, mask = playground_batch(4, 3)
    with torch.no_grad():
        flat = scorer(prompts, actions, mask)
        single = scorer(prompts[1], actions[1], mask[1])
        grid = scorer([prompts[:2], prompts[2:]], [actions[:2], actions[2:]], mask.reshape(2, 2, 5))
    assert single[0].shape == (5,) and single[1].shape == (5, 64) and single[2].shape == (64,)
    assert_close([s for s in single], [f[1] for f in flat])
    assert_close([g.flatten(0, 1) for g in grid], flat)


def test_bad_inputs_give_clear_errors(tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, actions, mask = playground_batch(3, 3)
    with pytest.raises(ValueError, match="prompt batch of size 2 but candidate batch of size 3"):
        scorer(prompts[:2], actions, mask)
    with pytest.raises(ValueError, match="actions has 5 entries where the action mask's shape asks for 4"):
        scorer(prompts, actions, mask[:, :4])
    with pytest.raises(ValueError, match="prompt batch of size 3 but candidate batch of size 2"):
        scorer(prompts, actions[:2], mask[:2])
    with pytest.raises(ValueError, match="action_mask must be a bool tensor"):
        scorer(prompts, actions, mask.tolist())
    actions[0][1] = ""
    with pytest.raises(ValueError, match="legal .* candidate action has no tokens"):
        scorer(prompts, actions, mask)
    mask[0, 1] = False  # an empty, masked candidate is allowed (e.g. padding of variable scenes)
    assert torch.isfinite(scorer(prompts, actions, mask)[0]).all()


def test_candidate_tokenisation_is_cached(tiny_paths, make_scorer_for, playground_batch):
    # issue 14: the default ("exact") moves the prompt's trailing space into the candidate, so the
    # cache is checked on the "separate" tokenisation (the candidates' own texts) and, below, on "exact".
    scorer = make_scorer_for(tiny_paths["t5"], tokenization="separate")
    prompts, actions, mask = playground_batch(2, 3)
    with torch.no_grad():
        scorer(prompts, actions, mask)
    assert set(scorer._candidate_ids) == {text for row in actions for text in row}


def test_exact_tokenisation_caches_the_encoder_decoder_continuations(tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, actions, mask = playground_batch(2, 3)
    with torch.no_grad():
        scorer(prompts, actions, mask)
    assert set(scorer._candidate_ids) == {" " + text for row in actions for text in row}


def test_decoder_only_exact_tokenisation_is_memoised_least_recently_used(tiny_paths, make_scorer_for, playground_batch):
    # a replayed prompt was tokenised when it was acted on: a pair seen before is not encoded again,
    # gives what a fresh tokenisation gives, and only the most recent pairs are kept
    from torchrl_glam.modules.tokenisation import CandidateTokeniser

    tokenizer = make_scorer_for(tiny_paths["llama"]).tokenizer
    prompts, actions, mask = playground_batch(6, 3, uneven=True)
    assert len(set(prompts)) == 6
    cached = CandidateTokeniser(tokenizer, is_encoder_decoder=False, tokenization="exact", pair_cache_size=4)
    fresh = CandidateTokeniser(tokenizer, is_encoder_decoder=False, tokenization="exact", pair_cache_size=0)
    encoded = []
    encode = cached.encode
    cached.encode = lambda texts, **kwargs: encoded.extend(texts) or encode(texts, **kwargs)
    cpu = torch.device("cpu")
    cached(prompts[:4], actions[:4], mask[:4], left_pad_prompts=True, device=cpu)
    encoded.clear()
    again = cached(prompts[2:], actions[2:], mask[2:], left_pad_prompts=True, device=cpu)  # 2 seen, 2 new
    assert len(encoded) == 2 * (1 + len(actions[0]))  # the new prompts and their whole texts only
    assert not any(text.startswith(prompts[2].rstrip()) for text in encoded)
    expected = fresh(prompts[2:], actions[2:], mask[2:], left_pad_prompts=True, device=cpu)
    for field in ("prompt_ids", "prompt_mask", "action_ids", "action_lengths"):
        assert torch.equal(getattr(again, field), getattr(expected, field)), field
    assert [context for context, _ in cached._pairs] == [prompt.rstrip() for prompt in prompts[2:]]
    assert not fresh._pairs


def test_token_ids_are_those_of_the_tokenizers_own_call(kind, tiny_paths, make_scorer_for, playground_batch):
    # the scorer asks the tokenizers library directly (no offsets); the ids must not change, and a
    # tokenizer whose tokenizer.json pads or truncates by itself goes through transformers' call
    scorer = make_scorer_for(tiny_paths[kind])
    texts = playground_batch(3, 3, uneven=True)[0] + ["", "  Go  to\n\nthe red ", "ünïcödé Ω", " Grasp"]
    for special in (True, False):
        assert (
            scorer._encode(texts, add_special_tokens=special)
            == scorer.tokenizer(texts, add_special_tokens=special)["input_ids"]
        )
    scorer.tokenizer.backend_tokenizer.enable_padding(pad_id=scorer.pad_id)
    try:
        assert len({len(ids) for ids in scorer._encode(texts)}) > 1  # not padded
    finally:
        scorer.tokenizer.backend_tokenizer.no_padding()


def test_bfloat16_model_gives_float32_outputs_close_to_naive(kind, tiny_paths, make_scorer_for, playground_batch):
    # for T5: the prefix tree's mask and position bias in the model's dtype
    scorer = make_scorer_for(tiny_paths[kind], dtype="bfloat16")
    prompts, actions, mask = playground_batch(2, 3, uneven=True)
    with torch.no_grad():
        shared, naive = scorer(prompts, actions, mask), scorer.naive(prompts, actions, mask)
    assert all(tensor.dtype == torch.float32 for tensor in shared)
    torch.testing.assert_close(shared[0], naive[0], atol=0.1, rtol=0.02)


def test_scoring_uses_no_deprecated_transformers_argument(kind, tiny_paths, make_scorer_for, playground_batch):
    """transformers renamed ``past_key_values`` to ``cache`` and warns that the old name goes in a
    later release: the scorer's shared-prefix path must not use a name that is on its way out."""
    import warnings

    scorer = make_scorer_for(tiny_paths[kind])
    prompts, actions, mask = uneven_inputs(playground_batch)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        scorer(prompts, actions, mask)
    deprecations = [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert not [m for m in deprecations if "deprecated" in m], deprecations
