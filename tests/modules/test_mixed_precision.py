"""``model.autocast=bfloat16``: the LLM computes in bfloat16 under ``torch.autocast`` while its
weights, gradients and optimiser stay float32; refused in one line where the device has no fast
bfloat16, or over weights that are not float32."""

import pytest
import torch

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.modules import mixed_precision
from torchrl_glam.training.config.base import ConfigError


def test_autocast_scores_in_bfloat16_and_trains_float32_weights(tiny_paths, make_scorer_for, playground_batch):
    scorer = make_scorer_for(tiny_paths["t5"])
    prompts, candidates, mask = playground_batch(4, 5, seed=0, uneven=True)
    mask[1, 3] = False
    with torch.no_grad():
        exact = scorer(prompts, candidates, mask)
    scorer.autocast_dtype = torch.bfloat16
    mixed = scorer(prompts, candidates, mask)
    for got, expected in zip(mixed, exact):
        assert got.dtype == torch.float32
        assert not torch.equal(got.detach(), expected)  # computed in bfloat16 ...
        torch.testing.assert_close(got.detach(), expected, rtol=0.05, atol=0.1)  # ... to its precision
    (mixed[0][mask].sum() + mixed[1].sum()).backward()
    grads = [p.grad for p in scorer.model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert all(p.dtype == torch.float32 for p in scorer.model.parameters())


@pytest.mark.parametrize("kind", ["t5", "llama"])
def test_autocast_trains_lora_adapters_in_float32(tiny_paths, make_scorer_for, playground_batch, kind):
    scorer = make_scorer_for(tiny_paths[kind], lora_rank=4)
    scorer.autocast_dtype = torch.bfloat16
    prompts, candidates, mask = playground_batch(3, 4, seed=1)
    scores, hidden, _ = scorer(prompts, candidates, mask)
    (scores.sum() + hidden.sum()).backward()
    adapters = [p for p in scorer.model.parameters() if p.requires_grad]
    assert adapters and all(p.dtype == torch.float32 and p.grad is not None for p in adapters)
    assert all(torch.isfinite(p.grad).all() for p in adapters) and any(p.grad.abs().sum() > 0 for p in adapters)


def test_the_config_passes_autocast_to_the_scorer():
    from torchrl_glam.training.factories import make_glam_agent

    agent = make_glam_agent(make_config("smoke", {"model.autocast": "bfloat16"}))
    assert agent.llm.autocast_dtype == torch.bfloat16
    assert make_glam_agent(make_config("smoke")).llm.autocast_dtype is None


def test_autocast_is_refused_in_one_line_without_fast_bfloat16(monkeypatch):
    monkeypatch.setattr(mixed_precision, "has_fast_bfloat16", lambda device: False)
    with pytest.raises(
        ConfigError, match=r"model.autocast='bfloat16' but 'cpu' has no fast bfloat16.*drop model.autocast"
    ):
        make_config("smoke", {"model.autocast": "bfloat16"}).check_device()
    make_config("smoke").check_device()  # without autocast: nothing to check


@pytest.mark.parametrize(
    "overrides",
    [{"model.autocast": "float16"}, {"model.autocast": "bfloat16", "model.dtype": "bfloat16"}],
    ids=["float16", "bfloat16-weights"],
)
def test_autocast_other_than_bfloat16_over_float32_weights_is_refused(overrides):
    with pytest.raises(ValueError, match=r"model.autocast=.* with model.dtype=.*expected None or 'bfloat16'"):
        make_config("smoke", overrides)


def test_fast_bfloat16_follows_the_cpus_flags(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(mixed_precision, "Path", lambda path: cpuinfo if path == "/proc/cpuinfo" else path)
    monkeypatch.setattr(mixed_precision.sys, "platform", "linux")
    cpuinfo.write_text("flags\t\t: fpu sse2 avx2 avx512f\n")
    assert not mixed_precision.has_fast_bfloat16("cpu")
    cpuinfo.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    assert mixed_precision.has_fast_bfloat16("cpu")
