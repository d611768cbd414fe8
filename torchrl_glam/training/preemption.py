"""Stopping a training loop cleanly: at its next iteration boundary, with a checkpoint written.

Slurm preemption and time limits arrive as signals. Saving from inside a signal handler could
catch the loop in the middle of an optimiser step (a torn checkpoint), so the handler only asks
(:meth:`StopRequest.request`); the loop checks :attr:`StopRequest.requested` between iterations,
writes its checkpoint, and acknowledges. The Slurm launcher runs the loop in a worker thread and
waits for that acknowledgement before requeueing the job; a plain ``python examples/...`` run
installs :func:`stop_on_signals` so that Ctrl-C, SIGTERM and Slurm's USR1 / USR2 (``sbatch
--signal``) also end with a checkpoint. Under submitit, :func:`requeue_on_both_user_signals` makes
USR1 do what submitit does on USR2 (checkpoint and requeue) instead of killing the job.
"""

from __future__ import annotations

import signal
import threading

#: Exit code of a training script that stopped early with its checkpoint written (resume with --resume).
PREEMPTED = 3


class StopRequest:
    def __init__(self) -> None:
        self._requested = threading.Event()
        self._stopped = threading.Event()

    def request(self) -> None:
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def acknowledge(self) -> None:
        """Called by the loop once its checkpoint is written and it is about to return."""
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def reset(self) -> None:
        self._requested.clear()
        self._stopped.clear()


#: The process-wide request the training scripts check.
STOP = StopRequest()


USER_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


def stop_on_signals(signals=(signal.SIGINT, signal.SIGTERM, *USER_SIGNALS)) -> None:
    """Turns these signals into a stop request (main thread only; a second Ctrl-C still kills)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        if STOP.requested:
            signal.default_int_handler(signum, frame)
        STOP.request()

    for sig in signals:
        signal.signal(sig, handler)


def requeue_on_both_user_signals() -> None:
    """Gives USR1 and USR2 the same handler (main thread only): submitit's checkpoint-and-requeue
    where it installed one on either, else a stop request. Slurm sends whichever ``--signal``
    names, and an unhandled USR1 ends the job without a checkpoint."""
    if threading.current_thread() is not threading.main_thread():
        return
    installed = [signal.getsignal(sig) for sig in USER_SIGNALS]
    handler = next((h for h in installed if callable(h)), None)
    if handler is None:

        def handler(signum, frame):
            STOP.request()

    for sig, current in zip(USER_SIGNALS, installed):
        if not callable(current):
            signal.signal(sig, handler)
