"""Issue 43, item 6: Slurm's USR1 (``scancel --signal=USR1``, ``sbatch --signal=USR1@90``) stops a
run with a checkpoint like USR2, instead of killing it. Run in subprocesses: an unhandled USR1
would kill the test process."""

import subprocess
import textwrap

from reliability_helpers import PYTHON, ROOT, subprocess_env

JOB_UNDER_SUBMITIT = textwrap.dedent("""
    import os, signal, time, types
    import submitit
    from torchrl_glam.launch import job as job_module

    requeued = []
    signal.signal(signal.SIGUSR2, lambda signum, frame: requeued.append(signum))  # submitit's handler
    submitit.JobEnvironment = lambda: types.SimpleNamespace(num_tasks=1)

    def main(argv):
        os.kill(os.getpid(), signal.SIGUSR1)  # what scancel --signal=USR1 sends
        time.sleep(1.5)
        return 0

    job_module.get_script = lambda name: types.SimpleNamespace(main=main)
    job_module.TrainingJob("sac_glam", [])()
    print("requeue handler ran for", requeued)
""")

PLAIN_SCRIPT = textwrap.dedent("""
    import os, signal
    from torchrl_glam.training.preemption import STOP, stop_on_signals
    stop_on_signals()
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        STOP.reset()
        os.kill(os.getpid(), sig)
        print(sig.name, "stop requested:", STOP.requested)
""")


def _run(code):
    return subprocess.run(
        [PYTHON, "-c", code], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )


def test_usr1_under_submitit_checkpoints_and_requeues_like_usr2():
    done = _run(JOB_UNDER_SUBMITIT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "requeue handler ran for [10]" in done.stdout  # signal 10: SIGUSR1


def test_usr1_and_usr2_stop_a_plain_script_with_a_checkpoint():
    done = _run(PLAIN_SCRIPT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "SIGUSR1 stop requested: True" in done.stdout and "SIGUSR2 stop requested: True" in done.stdout
