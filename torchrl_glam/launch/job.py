"""A training run as a submitit job that survives preemption and time limits.

``TrainingJob(script, argv)()`` runs ``main(argv)`` of a training script (``examples/sac_glam.py``)
in a worker thread. The main thread stays free for submitit's signal handler: on preemption or
timeout it calls :meth:`TrainingJob.checkpoint`, which asks the loop to stop at its next iteration
boundary (``training/preemption.py``), waits until the loop has written its checkpoint, and hands
submitit the same job to requeue. The script's command line always carries ``--resume``, so the
requeued job continues from that checkpoint. In a multi-task job, every task exports the
``torch.distributed`` variables of submitit's job environment first (data parallel).
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import submitit

from torchrl_glam.training.preemption import PREEMPTED, STOP


def _load_script(script: Path):
    spec = importlib.util.spec_from_file_location(f"torchrl_glam_job_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TrainingJob(submitit.helpers.Checkpointable):
    """Runs ``main(argv)`` of ``script``; requeues itself with a checkpoint on preemption."""

    def __init__(self, script: str | os.PathLike, argv: list[str], stop_timeout_s: float = 600.0) -> None:
        self.script = str(Path(script).resolve())
        self.argv = list(argv)
        self.stop_timeout_s = stop_timeout_s

    def __call__(self) -> int:
        environment = submitit.JobEnvironment()
        if environment.num_tasks > 1:
            submitit.helpers.TorchDistributedEnvironment().export(
                set_cuda_visible_devices=False, overwrite=True
            )
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(environment.local_rank))
        STOP.reset()
        module = _load_script(Path(self.script))
        outcome: dict = {}

        def run():
            try:
                outcome["code"] = module.main(self.argv)
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
            raise RuntimeError(f"{self.script} {' '.join(self.argv)} exited with code {outcome['code']}")
        return outcome["code"]

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        STOP.request()
        if not STOP.wait(self.stop_timeout_s):
            print(f"training did not stop within {self.stop_timeout_s} s: requeueing from the last periodic checkpoint")
        return submitit.helpers.DelayedSubmission(TrainingJob(self.script, self.argv, self.stop_timeout_s))
