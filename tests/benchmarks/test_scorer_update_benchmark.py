"""The scorer-update benchmark's worker: what one subprocess of ``--compare`` measures and reports."""
import pytest

from torchrl_glam.benchmarks import scorer_update
from torchrl_glam.benchmarks.training import CURRENT_TREE


def test_the_worker_times_an_update_and_its_memory_and_the_shared_and_naive_scoring():
    result = scorer_update.worker("tiny-decoder", batch=4, repeats=1, expect_tree=str(CURRENT_TREE))
    assert result["update_seconds"] > 0 and result["update_cpu_seconds"] > 0 and len(result["update_seconds_each"]) == 1
    assert result["peak_mb_above_load"] >= 0 and result["loaded_mb"] > 0
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
    result = scorer_update._run(CURRENT_TREE, 1, ["--model", "tiny-decoder", "--batch", "4", "--repeats", "1",
                                                  "--live-memory"])
    assert result["live_peak_mb_above_load"] > 0 and "update_seconds" not in result
