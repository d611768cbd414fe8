"""The launcher on a real Slurm cluster (slurm/start_local_slurm.sh starts one on this machine),
and data-parallel training over gloo.

The cluster tests change the machine (the start script installs Debian's Slurm and MariaDB
packages and starts their daemons), so they are opt-in: ``TORCHRL_GLAM_SLURM_TESTS=1`` (``.ci/run``
sets it). Opted in, a cluster that cannot start fails them; the daemons the tests started are
stopped afterwards. Otherwise they are skipped with that reason.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch
from data_parallel import run_ranks

from torchrl_glam.training.checkpoint import read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sac_glam.py"
SMOKE = ["--preset", "smoke", "--no-progress"]
#: a data-parallel run short enough for a test: one evaluation and one checkpoint, at its end
SHORT_RUN = ["total_steps=96", "eval_every=96", "checkpoint_every=96", "learning_starts=16"]


def _agent(run_dir: Path, rank: int = 0) -> dict:
    path = run_dir / ("" if rank == 0 else f"rank{rank}") / "checkpoint.pt"
    return read_checkpoint(path)


def _assert_same_weights(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.slow
def test_data_parallel_ranks_hold_identical_weights_after_updates(tmp_path):
    """Two processes over gloo (torch.distributed env:// variables, as the launcher exports them)."""
    run = tmp_path / "ddp"
    args = [*SMOKE, "--run-dir", str(run), *SHORT_RUN]
    run_ranks(EXAMPLE, args, timeout=600)
    states = [_agent(run, r) for r in range(2)]
    assert states[0]["updater"]["updates"] == states[1]["updater"]["updates"] > 0
    _assert_same_weights(states[0]["loss"], states[1]["loss"])
    # ... while each rank ran its own environments
    assert states[0]["env"]["rules"]["objects"].shape[0] == 4
    assert (states[0]["env"]["rules"]["objects"] != states[1]["env"]["rules"]["objects"]).any()
    assert (run / "evaluations.jsonl").exists() and not (run / "rank1" / "evaluations.jsonl").exists()


# ---------------------------------------------------------------------------- real Slurm
OPT_IN = "TORCHRL_GLAM_SLURM_TESTS"


def _cluster_answers() -> bool:
    return bool(shutil.which("sinfo")) and subprocess.run(["sinfo"], capture_output=True).returncode == 0


def _start_cluster() -> str | None:
    """None when the cluster started, else why not."""
    if os.geteuid() != 0:
        return "starting a local Slurm needs root"
    if not shutil.which("apt-get"):
        return "no apt-get to install Debian's Slurm packages"
    done = subprocess.run(["bash", str(ROOT / "slurm" / "start_local_slurm.sh")], capture_output=True, text=True)
    if done.returncode != 0:
        return f"slurm/start_local_slurm.sh failed: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return None


@pytest.fixture(scope="module")
def slurm():
    """A Slurm cluster: the one that answers, or one started on this machine and stopped after."""
    if _cluster_answers():
        yield True
        return
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(
            f"opt-in: {OPT_IN}=1 installs Debian's Slurm and MariaDB and starts a local cluster "
            "(stopped after the tests)"
        )
    reason = _start_cluster()
    if reason is not None:
        pytest.fail(f"{OPT_IN}=1 asks for the Slurm tests, but: {reason}")
    try:
        yield True
    finally:
        subprocess.run(["bash", str(ROOT / "slurm" / "stop_local_slurm.sh")], capture_output=True, timeout=300)


def _launch(argv):
    from torchrl_glam.launch.launcher import main

    return main(argv)


@pytest.mark.slow
def test_seed_array_on_slurm_gives_one_run_directory_per_seed(slurm, tmp_path):
    code = _launch(
        [
            "--seeds",
            "0-1",
            "--runs-root",
            str(tmp_path),
            "--wait",
            "--time",
            "10",
            "--cpus-per-task",
            "1",
            *SMOKE[:2],
            "total_steps=64",
            "eval_every=64",
        ]
    )
    assert code == 0
    for seed in (0, 1):
        run = tmp_path / "smoke" / f"seed{seed}"
        assert (run / "checkpoint.pt").exists() and (run / "evaluations.jsonl").exists()
        assert _agent(run)["config"]["run"]["seed"] == seed
    job_id = __import__("json").loads((tmp_path / "smoke" / "seed0" / "launch.json").read_text())["job_id"]
    assert "_" in job_id  # one array job, one task per seed
    deadline = time.time() + 60
    while True:  # results are read from files; Slurm's accounting follows a little later
        states = subprocess.run(
            ["sacct", "-n", "-X", "-j", job_id.split("_")[0], "-o", "State"], capture_output=True, text=True
        ).stdout.split()
        if states.count("COMPLETED") == 2 or time.time() > deadline:
            break
        time.sleep(1)
    assert states.count("COMPLETED") == 2, states


@pytest.mark.slow
def test_preempted_job_resumes_and_ends_like_an_uninterrupted_run(slurm, tmp_path):
    import submitit

    from torchrl_glam.launch.job import TrainingJob
    from torchrl_glam.launch.launcher import make_executor

    args = [*SMOKE, "total_steps=1600", "checkpoint_every=160", "eval_every=100000", "seed=3"]
    straight = tmp_path / "straight"
    from torchrl_glam.algorithms import get_script

    example = get_script("sac_glam").load()
    assert example.main(args + ["--run-dir", str(straight)]) == 0

    run = tmp_path / "preempted"
    executor = make_executor(tmp_path / "submitit", {"timeout_min": 10, "cpus_per_task": 1})
    job = executor.submit(TrainingJob("sac_glam", args + ["--run-dir", str(run), "--resume"]))
    deadline = time.time() + 300
    while not (run / "checkpoint.pt").exists():  # let it make progress first
        assert time.time() < deadline and job.state not in ("FAILED", "CANCELLED"), job.state
        time.sleep(1)
    # what Slurm does ahead of a time limit: the signal submitit asks for in its sbatch script
    # (--signal=USR2@<delay>), on which the job checkpoints and requeues itself
    subprocess.check_call(["scancel", job.job_id, "--signal", "USR2"])
    assert job.result() == 0
    log = Path(job.paths.stdout).read_text()
    assert "stopped at" in log and "resumed from" in log, log[-3000:]
    final, reference = _agent(run), _agent(straight)
    assert final["assembler"]["env_steps"] == reference["assembler"]["env_steps"]
    assert final["updater"]["updates"] == reference["updater"]["updates"]
    assert isinstance(job, submitit.Job)


@pytest.mark.slow
def test_two_task_job_trains_data_parallel_on_slurm(slurm, tmp_path):
    from torchrl_glam.launch.job import TrainingJob
    from torchrl_glam.launch.launcher import make_executor

    run = tmp_path / "ddp"
    executor = make_executor(tmp_path / "submitit", {"timeout_min": 10, "cpus_per_task": 1, "tasks_per_node": 2})
    job = executor.submit(
        TrainingJob(
            "sac_glam",
            [*SMOKE, "--run-dir", str(run), *SHORT_RUN],
        )
    )
    assert job.results() == [0, 0]
    states = [_agent(run, r) for r in range(2)]
    assert states[0]["updater"]["updates"] > 0
    _assert_same_weights(states[0]["loss"], states[1]["loss"])
