"""Which of the twins variant's two options carries its lift (session 23): greedy success averaged
over the five evaluations from 80k to 100k steps, per run, on each evaluation set and per goal type
(goal types uniform), for the three settings that differ only in them:

- ``target_llm``: neither option (session 14, three seeds);
- ``target_llm_typesuniform``: the batches alone (``batch_strategy=types_uniform``; seed 0);
- ``target_llm_twins``: the twins alone (``her_twins=true`` with the paper's ``ratio`` batches;
  seed 0);
- ``target_llm_twins_typesuniform``: both (four seeds).

Writes ``attribution.csv`` beside this file from the committed ``evaluations.jsonl`` files.

    python docs/results/cpu_full/critic/attribution.py
"""
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tables import SETS, load  # noqa: E402  (the committed runs' evaluations, as the README's tables read them)

PREFIX = "sac_glam_her_actorlr3e-5_criticllm3e-4_"
VARIANTS = {"neither": "targetllm", "types_uniform": "targetllm_typesuniform", "twins": "targetllm_twins",
            "twins_and_types_uniform": "targetllm_twins_typesuniform"}
GOAL_TYPES = ("grasp", "grow", "grow-then-grasp", "grow-then-grow")
WINDOW = (80_000, 100_000)


def rows():
    for options, variant in VARIANTS.items():
        for seed, by_set in load(PREFIX + variant).items():
            window = {name: [e for e in evaluations if WINDOW[0] <= e["env_steps"] <= WINDOW[1]]
                      for name, evaluations in by_set.items()}
            row = {"options": options, "run": f"{PREFIX}{variant}/{seed}", "evaluations": len(window["train"])}
            for name in SETS:
                row[name] = statistics.mean(e["success"] for e in window[name])
            for goal_type in GOAL_TYPES:
                row[f"train/{goal_type}"] = statistics.mean(e.get(f"success/{goal_type}", 0.0) for e in window["train"])
            yield row


def main() -> None:
    table = list(rows())
    with open(HERE / "attribution.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        for row in table:
            writer.writerow({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in row.items()})
    for row in table:
        print(f"{row['options']:<24} {row['run'].split('/')[-1]}  " + "  ".join(
            f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float)))


if __name__ == "__main__":
    main()
