"""How fast a run goes and when its next evaluation comes: the line a run without a progress bar
(piped output, a Slurm log) prints every :data:`PACE_EVERY_SECONDS`, e.g.
``step 1,200/50,000: 7.4 steps/s, next evaluation at 2,000 in ~1.8 min, done in ~1.8 h``.

The bar shows rate and remaining time on a terminal; a log only had the evaluation lines, minutes
apart. The rate is the training's since the previous line, evaluations left out; the time left
adds the evaluations still to come, each as long as the last one.
"""

from __future__ import annotations

#: seconds of training (evaluations left out) between two pace lines
PACE_EVERY_SECONDS = 60.0

__all__ = ["PACE_EVERY_SECONDS", "duration", "pace_line"]


def duration(seconds: float) -> str:
    """``45`` -> ``"~45 s"``, ``108`` -> ``"~1.8 min"``, ``6480`` -> ``"~1.8 h"``."""
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.1f} min"
    return f"~{seconds / 3600:.1f} h"


def pace_line(
    steps: int,
    total_steps: int,
    steps_per_second: float,
    next_evaluation: int | None,
    evaluation_seconds: float = 0.0,
) -> str:
    """Where a run stands (``next_evaluation``: the step of the next evaluation, ``None`` for none;
    ``evaluation_seconds``: what the evaluations still to come add to the time left)."""
    line = f"step {steps:,}/{total_steps:,}: {steps_per_second:.1f} steps/s"
    if steps_per_second <= 0:
        return line
    if next_evaluation is not None:
        line += f", next evaluation at {next_evaluation:,} in {duration((next_evaluation - steps) / steps_per_second)}"
    return line + f", done in {duration(max(total_steps - steps, 0) / steps_per_second + evaluation_seconds)}"
