"""A training run as a submitit job that survives preemption and time limits.

``TrainingJob(algorithm, argv)()`` runs ``main(argv)`` of the algorithm's training script
(``torchrl_glam.algorithms.scripts``, found by import name, so a wheel install works) in a worker
thread. The main thread stays free for submitit's signal handler: on preemption or
timeout (Slurm's USR2, or USR1: both are handled) it calls :meth:`TrainingJob.checkpoint`, which asks the
loop to stop at its next iteration
boundary (``training/preemption.py``), waits until the loop has written its checkpoint, and hands
submitit the same job to requeue. The script's command line always carries ``--resume``, so the
requeued job continues from that checkpoint. In a multi-task job, every task exports the
``torch.distributed`` variables of submitit's job environment first (data parallel).
"""

from __future__ import annotations

import logging
import os
import threading

import submitit

from torchrl_glam.algorithms import get_script
from torchrl_glam.training.preemption import PREEMPTED, STOP, requeue_on_both_user_signals

logger = logging.getLogger(__name__)


class TrainingJob(submitit.helpers.Checkpointable):
    """Runs ``main(argv)`` of ``algorithm``'s training script; requeues itself with a checkpoint on
    preemption."""

    def __init__(self, algorithm: str, argv: list[str], stop_timeout_s: float = 600.0) -> None:
        get_script(algorithm)  # an unknown name fails at submission, not on the cluster
        self.algorithm = algorithm
        self.argv = list(argv)
        self.stop_timeout_s = stop_timeout_s

    def __call__(self) -> int:
        environment = submitit.JobEnvironment()
        if environment.num_tasks > 1:
            submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(environment.local_rank))
        STOP.reset()
        requeue_on_both_user_signals()  # submitit handles only USR2; scancel --signal=USR1 would kill
        main = get_script(self.algorithm).main
        outcome: dict = {}

        def run():
            try:
                outcome["code"] = main(self.argv)
            except BaseException as err:  # re-raised in the main thread
                outcome["error"] = err
                STOP.acknowledge()

        worker = threading.Thread(target=run, name="training", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)  # short waits: the main thread keeps handling signals
        if "error" in outcome:
            raise outcome["error"]
        if outcome["code"] not in (0, PREEMPTED):
            raise RuntimeError(f"{self.algorithm} {' '.join(self.argv)} exited with code {outcome['code']}")
        return outcome["code"]

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        STOP.request()
        if not STOP.wait(self.stop_timeout_s):
            logger.warning(
                "training did not stop within %s s: requeueing from the last periodic checkpoint", self.stop_timeout_s
            )
        return submitit.helpers.DelayedSubmission(TrainingJob(self.algorithm, self.argv, self.stop_timeout_s))
