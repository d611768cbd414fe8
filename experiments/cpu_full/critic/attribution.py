"""Which of the twins variant's two options carries its lift (session 23): greedy success averaged
over the five evaluations from 80k to 100k steps, per run, on each evaluation set and per goal type
(goal types uniform), for the three settings that differ only in them:

- ``target_llm``: neither option (session 14, three seeds);
- ``target_llm_typesuniform``: the batches alone (``batch_strategy=types_uniform``; seed 0);
- ``target_llm_twins``: the twins alone (``her_twins=true`` with the paper's ``ratio`` batches;
  seeds 0 and 1, to 200k since session 24);
- ``target_llm_twins_typesuniform``: both (four seeds).

Writes ``attribution.csv`` beside this file from the committed ``evaluations.jsonl`` files.
``--window 180000 200000`` (session 24) averages the five evaluations from 180k to 200k instead,
over the runs that reached 200k, into ``attribution_200k.csv``; a run that stopped before the
window's end is named and left out.

    python experiments/cpu_full/critic/attribution.py [--window START END]
"""

import argparse
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tables import SETS, TYPES, load  # noqa: E402  (the committed runs' evaluations, as the README's tables read them)

PREFIX = "sac_glam_her_actorlr3e-5_criticllm3e-4_"
VARIANTS = {
    "neither": "targetllm",
    "types_uniform": "targetllm_typesuniform",
    "twins": "targetllm_twins",
    "twins_and_types_uniform": "targetllm_twins_typesuniform",
}


def rows(start: int, end: int):
    for options, variant in VARIANTS.items():
        for seed, by_set in load(PREFIX + variant).items():
            run = f"{PREFIX}{variant}/{seed}"
            if max(e["env_steps"] for e in by_set["train"]) < end:
                print(f"left out: {run} (stopped before {end:,} steps)")
                continue
            window = {
                name: [e for e in evaluations if start <= e["env_steps"] <= end] for name, evaluations in by_set.items()
            }
            row = {"options": options, "run": run, "evaluations": len(window["train"])}
            for name in SETS:
                row[name] = statistics.mean(e["success"] for e in window[name])
            for goal_type in TYPES:
                row[f"train/{goal_type}"] = statistics.mean(e.get(f"success/{goal_type}", 0.0) for e in window["train"])
            yield row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, nargs=2, default=(80_000, 100_000), metavar=("START", "END"))
    start, end = parser.parse_args().window
    table = list(rows(start, end))
    name = "attribution.csv" if end == 100_000 else f"attribution_{end // 1000}k.csv"
    with open(HERE / name, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        for row in table:
            writer.writerow({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in row.items()})
    for row in table:
        print(
            f"{row['options']:<24} {row['run'].split('/')[-1]}  "
            + "  ".join(f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float))
        )


if __name__ == "__main__":
    main()
