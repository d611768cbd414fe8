"""The scorer-update benchmark's worker: what one subprocess of ``--compare`` measures and reports."""

import pytest

from torchrl_glam.benchmarks import scorer_update
from torchrl_glam.benchmarks.training import CURRENT_TREE


def test_the_worker_times_an_update_and_its_memory_and_the_shared_and_naive_scoring():
    result = scorer_update.worker("tiny-decoder", batch=4, repeats=1, expect_tree=str(CURRENT_TREE))
    assert result["update_seconds"] > 0 and result["update_cpu_seconds"] > 0 and len(result["update_seconds_each"]) == 1
    # Linux reads resident sizes from per-CPU counters, approximately: an update that fits in memory
    # freed earlier in this process (after other tests) reads as ~0, give or take a fraction of a MB
    assert result["peak_mb_above_load"] > -1 and result["loaded_mb"] > 0
    assert result["shared_ms"] > 0 and result["naive_ms"] > 0 and result["naive_cpu_ms"] > 0


def test_the_worker_refuses_a_package_from_another_tree(tmp_path):
    with pytest.raises(SystemExit, match="not from"):
        scorer_update.worker("tiny-decoder", batch=4, repeats=1, expect_tree=str(tmp_path))


def test_unknown_models_are_refused():
    with pytest.raises(SystemExit, match="--models"):
        scorer_update.main(["--compare", "HEAD", "--models", "gpt5"])


def test_the_live_memory_process_reports_one_update_s_peak_under_its_own_malloc():
    """``--compare``'s second process per pair: malloc maps every block of 64 KB or more apart, so the
    peak is the tensors' own; it reports that peak and times nothing."""
    result = scorer_update._run(
        CURRENT_TREE, 1, ["--model", "tiny-decoder", "--batch", "4", "--repeats", "1", "--live-memory"]
    )
    assert result["live_peak_mb_above_load"] > 0 and "update_seconds" not in result


def test_the_worker_loads_the_model_in_the_dtype_asked(monkeypatch):
    """``--dtype bfloat16`` measures the GPU runs' precision; the tiny decoder is fully trained, so
    every weight is bfloat16 there."""
    import torch

    from torchrl_glam.modules import LLMScorer

    dtypes = []
    original = LLMScorer.__init__

    def record(self, model, *args, **kwargs):
        dtypes.append({parameter.dtype for parameter in model.parameters()})
        original(self, model, *args, **kwargs)

    monkeypatch.setattr(LLMScorer, "__init__", record)
    result = scorer_update.worker("tiny-decoder", batch=4, repeats=1, expect_tree=str(CURRENT_TREE), dtype="bfloat16")
    assert dtypes == [{torch.bfloat16}] and result["update_seconds"] > 0


def test_an_unknown_dtype_is_refused(capsys):
    with pytest.raises(SystemExit):
        scorer_update.main(["--compare", "HEAD", "--dtype", "float8"])
    assert "--dtype" in capsys.readouterr().err
