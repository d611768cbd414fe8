"""The training scalars a collapse shows in, from a run's logs, as one CSV per run (what its policy
does per 1,000 steps of training, the critic's mean Q on its batches, alpha, the entropy).

    python experiments/cpu_full/training_scalars.py RUN_DIR OUT_CSV
"""

import csv
import sys
from pathlib import Path

COLUMNS = [
    "train/success",
    "train/no_op_share",
    "train/repeat_go_to_share",
    "train/action_share/go_to",
    "train/action_share/grasp",
    "train/action_share/release",
    "entropy",
    "q_value",
    "alpha",
    "replay/relabeled_share",
]


def main(run_dir: str, out: str) -> None:
    scalars = Path(run_dir) / "logs" / "scalars"
    table: dict[int, dict[str, str]] = {}
    for name in COLUMNS:
        with open(scalars / f"{name}.csv") as f:
            for row in csv.reader(f):
                if row and row[0].isdigit():
                    table.setdefault(int(row[0]), {})[name] = f"{float(row[1]):.4g}"
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_steps", *COLUMNS])
        for step in sorted(table):
            writer.writerow([step, *(table[step].get(name, "") for name in COLUMNS)])


if __name__ == "__main__":
    main(*sys.argv[1:])
