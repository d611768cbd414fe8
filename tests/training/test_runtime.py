"""A run's process keeps the memory it frees for its next allocations (training/runtime.py): the
activations of one update come back as the next update's without page faults."""

import subprocess
import sys
import textwrap

import pytest

# an update's worth of activations (40 blocks of 2 MB), allocated and freed ten times
UPDATES = textwrap.dedent("""
    import resource, sys, torch
    from torchrl_glam.training.runtime import apply_runtime
    from torchrl_glam.algorithms.sac_glam.config import make_config
    if sys.argv[1] == "run":
        apply_runtime(make_config("smoke", {}))

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    for update in range(12):
        if update == 2:
            start = faults()
        activations = [torch.ones(500_000) for _ in range(40)]
        del activations
    print((faults() - start) / 10)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc (Linux) only")
def test_a_run_reuses_freed_memory_instead_of_faulting_it_back_in():
    faults_per_update = {
        process: float(
            subprocess.run([sys.executable, "-c", UPDATES, process], check=True, capture_output=True, text=True).stdout
        )
        for process in ("plain", "run")
    }
    assert faults_per_update["run"] < faults_per_update["plain"] / 5, faults_per_update
