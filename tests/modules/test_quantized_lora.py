"""QLoRA on CPU: a 4-bit model with LoRA keeps non-zero LoRA gradients after acting.

The trap (bitsandbytes 0.50, CPU): ``Linear4bit.forward`` repacks its weights into a CPU inference
layout the first time it runs with ``module.training == False`` on an input that does not require
grad (on CPUs with AVX512-BF16). Every later forward, training ones included, uses the repacked
weights through ``gemv_4bit``, which has no autograd kernel: the backward pass stops there and the
LoRA adapters below get no gradient (``None``), with only a PyTorch UserWarning.
The package avoids it by never switching the LLM to eval mode: ``load_llm`` disables dropout
instead, and ``LLMScorer`` keeps a quantised LLM in train mode
whatever its parents do (``scorer.eval()``, a collector's ``policy.eval()``).
"""

import pytest
import torch

from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm

bitsandbytes = pytest.importorskip("bitsandbytes", reason="QLoRA tests need bitsandbytes")


@pytest.fixture
def quantised(tiny_paths, kind):
    try:
        llm = load_llm(LLMConfig(str(tiny_paths[kind]), quantization="4bit", lora_rank=4))
    except (RuntimeError, ImportError, NotImplementedError) as error:  # no CPU backend for this build
        pytest.skip(f"bitsandbytes cannot load a 4-bit model on this machine: {error}")
    return llm


def lora_gradient(model):
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
    return sum(float(g.abs().sum()) for g in grads if g is not None)


def linear_4bit_layers(model):
    return [m for m in model.modules() if type(m).__name__ == "Linear4bit"]


def test_lora_gradients_survive_acting(quantised, playground_batch):
    assert linear_4bit_layers(quantised.model)
    scorer = LLMScorer(quantised.model, quantised.tokenizer, quantised.is_encoder_decoder)
    batch = playground_batch(2, 3)
    scorer.eval()  # what a collector may do before acting
    assert quantised.model.training
    with torch.no_grad():
        acting = scorer(*batch)
    scorer.train()
    scores, action_hidden, _ = scorer(*batch)
    torch.testing.assert_close(scores.detach(), acting[0])
    (scores.sum() + action_hidden.sum()).backward()
    assert lora_gradient(quantised.model) > 0


def test_llm_switched_to_eval_behind_the_scorer_is_restored(quantised, playground_batch):
    scorer = LLMScorer(quantised.model, quantised.tokenizer, quantised.is_encoder_decoder)
    quantised.model.eval()
    with pytest.warns(UserWarning, match="switching it back to train mode"), torch.no_grad():
        scorer(*playground_batch(2, 3))
    scorer(*playground_batch(2, 3))[0].sum().backward()
    assert lora_gradient(quantised.model) > 0


def test_the_trap_is_real_without_the_guard(quantised, playground_batch):
    """Bypassing the scorer: eval() + no_grad forward, then training gives no LoRA gradient. If this
    starts failing, bitsandbytes fixed the trap and the guard can go."""
    layer = linear_4bit_layers(quantised.model)[0]
    model, tokenizer = quantised.model, quantised.tokenizer
    inputs = tokenizer(playground_batch(2, 3)[0], return_tensors="pt", padding=True)
    if quantised.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.zeros(2, 1, dtype=torch.long)
    model.eval()
    with torch.no_grad():
        model(**inputs)
    if not getattr(layer.weight.quant_state, "packing_format_for_cpu", False):
        pytest.skip("bitsandbytes did not repack on this CPU (no AVX512-BF16): no trap here")
    model.train()
    model(**inputs).logits.sum().backward()
    assert lora_gradient(model) == 0


def test_8bit_lora_trains(tiny_paths, playground_batch):
    try:
        llm = load_llm(LLMConfig(str(tiny_paths["t5"]), quantization="8bit", lora_rank=4))
    except (RuntimeError, ImportError, NotImplementedError) as error:
        pytest.skip(f"bitsandbytes cannot load an 8-bit model on this machine: {error}")
    assert any(type(m).__name__ == "Linear8bitLt" for m in llm.model.modules())
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    scorer.eval()
    with torch.no_grad():
        scorer(*playground_batch(2, 3))
    scorer.train()
    scorer(*playground_batch(2, 3))[0].sum().backward()
    assert lora_gradient(llm.model) > 0
