"""Copy what the research record keeps of a finished run into an experiment's folder.

    python -m experiments.tools.collect /tmp/runs/sac_glam/seed0 experiments/x/runs/sac_glam/seed0

A run directory holds its checkpoints (tens of MB: never committed) beside the small files a
result is read from. This copies those: ``config.json``, ``environment.json`` (commit, machine),
``evaluations.jsonl``, the training episodes' success (``train_success.csv``) and, with HER, the
relabeled share of the replay (``relabeled_share.csv``) and of the batches
(``batch_relabeled_share.csv``). A run whose last evaluation is not at its ``run.total_steps`` is
refused (a stopped run's numbers are not its result) unless ``--partial``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

#: the run's file -> its name in the record; the first three are required
FILES = {
    "config.json": "config.json",
    "environment.json": "environment.json",
    "evaluations.jsonl": "evaluations.jsonl",
    "logs/scalars/train/success.csv": "train_success.csv",
    "logs/scalars/replay/relabeled_share.csv": "relabeled_share.csv",
    "logs/scalars/batch/relabeled_share.csv": "batch_relabeled_share.csv",
}
REQUIRED = 3


class CollectError(ValueError):
    """A run that cannot be collected, with what to do."""


def last_evaluation_step(run: Path) -> int | None:
    """The environment steps of the run's last complete evaluation (``None``: none yet)."""
    steps = None
    for line in (run / "evaluations.jsonl").read_text().splitlines():
        try:
            steps = int(json.loads(line)["env_steps"])
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line: the run was stopped while writing it
    return steps


def collect(run: Path, destination: Path, partial: bool = False) -> list[Path]:
    """Copies ``run``'s record into ``destination``; returns the files written."""
    missing = [name for name in list(FILES)[:REQUIRED] if not (run / name).is_file()]
    if missing:
        raise CollectError(f"{run} is no run directory: it lacks {', '.join(missing)}")
    total = json.loads((run / "config.json").read_text())["run"]["total_steps"]
    last = last_evaluation_step(run)
    if not partial and (last is None or last < total):
        raise CollectError(
            f"{run} has evaluations up to {last or 0} of its {total} steps: resume it to the end, "
            "or pass --partial to keep what it has"
        )
    destination.mkdir(parents=True, exist_ok=True)
    written = []
    for source, name in FILES.items():
        if (run / source).is_file():
            written.append(Path(shutil.copyfile(run / source, destination / name)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run directory (--run-dir of the training script)")
    parser.add_argument("destination", type=Path, help="the record's folder, e.g. experiments/x/runs/arm/seed0")
    parser.add_argument("--partial", action="store_true", help="also a run stopped before its total steps")
    args = parser.parse_args(argv)
    try:
        written = collect(args.run, args.destination, args.partial)
    except CollectError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
