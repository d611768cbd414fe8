"""``python -m torchrl_glam.benchmarks.gpu`` on a machine without a GPU says so and exits 0."""

import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the benchmark would run")
def test_without_a_gpu_it_says_so_and_exits_0():
    done = subprocess.run(
        [sys.executable, "-m", "torchrl_glam.benchmarks.gpu"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU" in done.stdout


def test_unknown_variants_are_refused():
    from torchrl_glam.benchmarks import gpu

    with pytest.raises(SystemExit):
        gpu.main(["--variants", "flan-t5-shape,gpt5"])
