"""The lean scoring paths change no number: a decoder-only prompt and its candidates' prefix tree in
one forward, and the LM head applied only where a candidate token is predicted (a chunk of rows at a
time), give the scores, hidden states and gradients of the full computation."""

from types import SimpleNamespace

import pytest
import torch

from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
from torchrl_glam.modules.causal_scoring import supports_prefix_tree
from torchrl_glam.modules.token_log_probs import log_probs_at


def full_logits_scorer(llm, monkeypatch):
    """Every pair as its own sequence through the model's own forward: all positions' logits over the
    whole vocabulary, log-softmaxed (the computation before the lean paths)."""
    monkeypatch.setattr("torchrl_glam.modules.causal_scoring.LEAN_CAUSAL_MODEL_TYPES", ())
    return LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder, shared_prefix=False)


def outputs_and_gradients(method, model, batch):
    model.zero_grad()
    out = method(*batch)
    (out[0].sum() + out[1].square().mean() + out[2].square().mean()).backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def saved_bytes(scorer, batch):
    """Bytes autograd saves for backward in one scoring of ``batch``."""
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: sizes.append(t.numel() * t.element_size()) or t, lambda t: t
    ):
        scorer(*batch)
    return sum(sizes)


def assert_same(ours, theirs, atol=1e-5, grad_atol=1e-4):
    (out, grads), (ref, ref_grads) = ours, theirs
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b.detach(), atol=atol, rtol=atol)
    assert grads.keys() == ref_grads.keys() and grads
    for name, grad in grads.items():
        torch.testing.assert_close(grad, ref_grads[name], atol=grad_atol, rtol=grad_atol)


@pytest.mark.parametrize("chunk_rows", [1, 3, 1000])
def test_log_probs_at_equals_the_full_log_softmax_in_any_chunking(chunk_rows, monkeypatch):
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50, bias=False)
    head.vocabulary = 50
    monkeypatch.setattr("torchrl_glam.modules.token_log_probs.LOGIT_CHUNK_ELEMENTS", 50 * chunk_rows)
    hidden = torch.randn(7, 8, requires_grad=True)
    rows, targets = torch.tensor([3, 0, 3, 6, 1, 3, 0]), torch.randint(0, 50, (7,))  # repeated rows
    results = []
    for lean in (True, False):
        head.zero_grad()
        hidden.grad = None
        if lean:
            values = log_probs_at(hidden, head, rows, targets)
        else:
            values = head(hidden).log_softmax(-1)[rows, targets]
        (values * torch.arange(7.0)).sum().backward()
        results.append((values.detach(), hidden.grad.clone(), head.weight.grad.clone()))
    for lean, full in zip(*results):
        torch.testing.assert_close(lean, full, atol=1e-6, rtol=1e-5)


def test_tree_equals_the_full_logits_of_the_pairs(kind, tiny_paths, playground_batch, monkeypatch):
    """Scores, hidden states and LoRA gradients; the head's rows split into chunks of two rows."""
    llm = load_llm(LLMConfig(str(tiny_paths[kind]), lora_rank=4))
    lean = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    monkeypatch.setattr("torchrl_glam.modules.token_log_probs.LOGIT_CHUNK_ELEMENTS", 2 * llm.model.config.vocab_size)
    batch = playground_batch(3, 4, seed=5, uneven=True)
    batch[1][1][2] = "Go to red living_thing"
    batch[2][1, 3] = False
    ours = outputs_and_gradients(lean, llm.model, batch)
    assert_same(ours, outputs_and_gradients(lean.naive, llm.model, batch))
    assert_same(ours, outputs_and_gradients(full_logits_scorer(llm, monkeypatch).naive, llm.model, batch))


def test_grouped_key_value_heads_stay_grouped_on_the_cpu_and_score_as_transformers_sdpa(tiny_paths, playground_batch):
    """The tiny decoder (4 query, 2 key/value heads) gets the GQA-keeping SDPA when scored lean;
    scores, hidden states and LoRA gradients are transformers' SDPA's, and autograd saves less."""
    from torchrl_glam.modules.causal_scoring import GQA_SDPA_ATTENTION

    llm = load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=4))
    assert llm.model.config._attn_implementation == "sdpa"
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    assert llm.model.config._attn_implementation == GQA_SDPA_ATTENTION
    batch = playground_batch(3, 4, seed=6, uneven=True)

    ours, ours_saved = outputs_and_gradients(scorer, llm.model, batch), saved_bytes(scorer, batch)
    llm.model.set_attn_implementation("sdpa")
    assert_same(ours, outputs_and_gradients(scorer, llm.model, batch))
    assert ours_saved < saved_bytes(scorer, batch)


def test_without_gradient_the_tree_attends_per_key_value_group_as_transformers_sdpa(
    tiny_paths, playground_batch, monkeypatch
):
    """Scoring without gradient (acting, the critic's targets) runs the prefix tree's masked attention
    as one product per key/value group (``_grouped_attention``): the scores and hidden states of
    transformers' SDPA, to float32 rounding."""
    from torchrl_glam.modules import causal_scoring

    llm = load_llm(LLMConfig(str(tiny_paths["llama"])))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    calls = []
    grouped = causal_scoring._grouped_attention
    monkeypatch.setattr(causal_scoring, "_grouped_attention", lambda *a: calls.append(a[0].shape) or grouped(*a))
    batch = playground_batch(3, 4, seed=6, uneven=True)
    with torch.no_grad():
        ours = scorer(*batch)
        assert len(calls) == llm.model.config.num_hidden_layers
        llm.model.set_attn_implementation("sdpa")
        theirs = scorer(*batch)
    assert len(calls) == llm.model.config.num_hidden_layers
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_gated_mlps_save_two_of_three_activations_and_score_as_transformers_mlp(tiny_paths, playground_batch):
    """The tiny decoder's MLPs (LoRA on all three projections) become :class:`SwiGLU` when scored lean;
    scores, hidden states and every LoRA gradient equal transformers' MLPs', bit for bit, and
    autograd saves one [tokens, intermediate] tensor fewer per layer."""
    from torchrl_glam.modules.swiglu import SwiGLU

    llm = load_llm(
        LLMConfig(
            str(tiny_paths["llama"]),
            lora_rank=4,
            lora_target_modules=["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"],
        )
    )
    layers = llm.model.get_decoder().layers
    originals = [layer.mlp for layer in layers]
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    assert all(isinstance(layer.mlp, SwiGLU) for layer in layers)
    batch = playground_batch(3, 4, seed=7, uneven=True)

    ours, ours_saved = outputs_and_gradients(scorer, llm.model, batch), saved_bytes(scorer, batch)
    names = set(dict(llm.model.named_parameters()))
    for layer, original in zip(layers, originals):
        layer.mlp = original
    assert set(dict(llm.model.named_parameters())) == names
    theirs = outputs_and_gradients(scorer, llm.model, batch)
    assert any("gate_proj.lora" in name for name in ours[1])
    assert_same(ours, theirs, atol=0, grad_atol=0)
    assert ours_saved < saved_bytes(scorer, batch)


@pytest.mark.parametrize("dtype, lora_rank", [("bfloat16", 4), ("float32", 0)])
def test_rms_norms_save_their_input_only_and_score_as_transformers_norms(
    tiny_paths, playground_batch, dtype, lora_rank
):
    """The tiny decoder's norms become :class:`RecomputedRMSNorm` when scored lean. In bfloat16 (whose
    norms save a float32 copy of their input) and with trained norm weights (which save the
    normalised states), scores, hidden states and gradients equal transformers' norms', bit for
    bit, and autograd saves less."""
    from torchrl_glam.modules.rms_norm import RecomputedRMSNorm

    llm = load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=lora_rank, dtype=dtype))
    decoder = llm.model.get_decoder()
    originals = {name: module for name, module in decoder.named_modules() if type(module).__name__ == "LlamaRMSNorm"}
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    assert len(originals) == 2 * len(decoder.layers) + 1
    assert all(isinstance(decoder.get_submodule(name), RecomputedRMSNorm) for name in originals)
    batch = playground_batch(3, 4, seed=8, uneven=True)

    ours, ours_saved = outputs_and_gradients(scorer, llm.model, batch), saved_bytes(scorer, batch)
    names = set(dict(llm.model.named_parameters()))
    for name, original in originals.items():
        parent, _, child = name.rpartition(".")
        setattr(decoder.get_submodule(parent) if parent else decoder, child, original)
    assert set(dict(llm.model.named_parameters())) == names
    theirs = outputs_and_gradients(scorer, llm.model, batch)
    assert lora_rank or any("norm" in name for name in ours[1])
    assert_same(ours, theirs, atol=0, grad_atol=0)
    assert ours_saved < saved_bytes(scorer, batch)


def test_half_precision_lora_adapters_compute_in_the_model_dtype_with_float32_weights(tiny_paths, playground_batch):
    """A bfloat16 decoder's LoRA adapters (float32 weights) run under autocast in bfloat16 instead of
    on float32 copies of their inputs: autograd saves less, the scores and gradients stay those of
    peft's float32 adapters to bfloat16 rounding, and the gradients reach the float32 weights."""
    llm = load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=4, dtype="bfloat16"))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    assert scorer._causal.adapter_dtype == torch.bfloat16
    batch = playground_batch(3, 4, seed=9, uneven=True)

    ours, ours_saved = outputs_and_gradients(scorer, llm.model, batch), saved_bytes(scorer, batch)
    assert ours[1] and all(grad.dtype == torch.float32 for grad in ours[1].values())
    assert all(grad.abs().sum() > 0 for name, grad in ours[1].items() if "lora_B" in name)  # lora_A's: 0 at B = 0
    scorer._causal.adapter_dtype = None  # peft's own casts
    assert_same(ours, outputs_and_gradients(scorer, llm.model, batch), atol=0.05, grad_atol=0.05)
    assert ours_saved < saved_bytes(scorer, batch)


def test_float32_and_fully_trained_models_run_without_autocast(tiny_paths):
    from torchrl_glam.modules.adapter_precision import adapter_autocast_dtype

    assert adapter_autocast_dtype(load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=4)).model) is None
    # fully trained in bfloat16: nothing in float32 to cast
    assert adapter_autocast_dtype(load_llm(LLMConfig(str(tiny_paths["llama"]), dtype="bfloat16")).model) is None


@pytest.mark.parametrize("grad", [False, True])
def test_the_tree_s_last_layer_computes_only_the_rows_read(tiny_paths, playground_batch, grad):
    """The last layer's attention queries and MLP rows start at the prompt's last token; every other
    layer computes all rows, and after the call the last layer does too (the naive pairs)."""
    from torchrl_glam.modules.causal_scoring import ROWS_FROM

    llm = load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=4))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    layers = llm.model.get_decoder().layers
    rows, queries = {}, {}
    for index, layer in enumerate(layers):
        layer.mlp.gate_proj.register_forward_hook(lambda m, args, out, i=index: rows.__setitem__(i, args[0].shape[1]))
        layer.self_attn.o_proj.register_forward_pre_hook(lambda m, args, i=index: queries.__setitem__(i, args[0]))
    batch = playground_batch(3, 4, seed=6, uneven=True)
    with torch.set_grad_enabled(grad):
        scorer(*batch)
    width = queries[0].shape[1]
    prompt_width = width - rows[len(layers) - 1] + 1
    assert 1 < prompt_width < width and all(rows[i] == width for i in range(len(layers) - 1))
    assert not queries[len(layers) - 1][:, : prompt_width - 1].any()  # the queries not computed
    assert queries[len(layers) - 1][:, prompt_width - 1 :].abs().sum(-1).all()
    assert all(getattr(module, ROWS_FROM) == 0 for module in (layers[-1].mlp, layers[-1].self_attn))
    with torch.set_grad_enabled(grad):
        scorer.naive(*batch)
    assert rows[len(layers) - 1] == queries[len(layers) - 1].shape[1]


def test_a_decoder_only_prompt_runs_once_with_its_candidates_tree(tiny_paths, make_scorer_for, playground_batch):
    """One forward of one sequence per prompt (no cache repeated per candidate): the prompt's tokens,
    then "Go", "Grasp", "Release", "Go to", the colours and the whole "Go to" candidates once each."""
    scorer = make_scorer_for(tiny_paths["llama"])
    prompts, _, _ = playground_batch(2, 3, seed=4)
    actions = [["Go to red cat", "Go to red lion", "Go to blue cat", "Grasp", "Release"]] * 2
    calls = []
    hook = scorer.model.get_decoder().register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        with torch.no_grad():
            scores = scorer(prompts, actions, torch.ones(2, 5, dtype=torch.bool))[0]
    finally:
        hook.remove()
    prompt_tokens = max(len(scorer._encode([p.rstrip()])[0]) for p in prompts)
    assert calls == [(2, prompt_tokens + 3 + 1 + 2 + 3)]
    assert torch.isfinite(scores).all()


def test_models_without_the_packed_tree_repeat_the_cache_and_score_the_same(tiny_paths, playground_batch, monkeypatch):
    """A model type off the list (its attention may ignore a 4D mask, or its logits be scaled) keeps
    the prompt's cache repeated per candidate; so do flash attention, which drops custom masks, and
    a sliding window, which the given mask would drop."""
    flash = SimpleNamespace(config=SimpleNamespace(model_type="llama", _attn_implementation="flash_attention_2"))
    windowed = SimpleNamespace(
        config=SimpleNamespace(model_type="mistral", _attn_implementation="sdpa", sliding_window=4096)
    )
    assert not supports_prefix_tree(flash) and not supports_prefix_tree(windowed)
    llm = load_llm(LLMConfig(str(tiny_paths["llama"])))
    scorer = full_logits_scorer(llm, monkeypatch)
    scorer.shared_prefix = True
    assert not scorer._causal.lean
    batch = playground_batch(3, 3, seed=3, uneven=True)
    with torch.no_grad():
        for ours, theirs in zip(scorer(*batch), scorer.naive(*batch)):
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_smollm2_tree_equals_the_full_logits_of_the_pairs(require_smollm2, monkeypatch):
    """SmolLM2-135M with LoRA, on real environment prompts: scores, hidden states and gradients of the
    packed tree with the chunked head equal those of every pair's whole-vocabulary logits."""
    from torchrl_glam.envs.playground import PlaygroundTextEnv

    llm = load_llm(LLMConfig("smollm2-135m", lora_rank=4))
    prompts = list(PlaygroundTextEnv(num_envs=2, goals="train", seed=0).reset()["prompt"])
    actions = [
        ["Go to red door", "Go to red cat", "Go to blue cat", "Grasp"],
        ["Go to green water", "Release", "Go to green tree", "Grasp"],
    ]
    batch = (prompts, actions, torch.tensor([[True, True, False, True], [True, True, True, True]]))
    ours = outputs_and_gradients(LLMScorer(llm.model, llm.tokenizer, False), llm.model, batch)
    reference = outputs_and_gradients(full_logits_scorer(llm, monkeypatch).naive, llm.model, batch)
    assert_same(ours, reference, atol=1e-4, grad_atol=1e-3)
