"""The README's tables, from the committed runs (``runs/<variant>/seed<k>/evaluations.jsonl``, or
``critic/runs/...`` for the variants of sessions 10-18).

    python experiments/cpu_full/tables.py                  # markdown on stdout; margin.csv beside it
    python experiments/cpu_full/tables.py --budget 200000  # the comparison at 200k (margin_200k.csv)

1. success at the end of the budget per evaluation set: mean ± std over seeds (numpy's std, ddof 0,
   as ``experiments.tools.results`` draws it), each seed's value in brackets;
2. per goal type at the end, greedy / sampled (the ``train`` and ``train_sampled`` sets);
3. the issue's "ahead by more than the seeds' spread": at each evaluation, SAC-GLAM+HER's mean
   minus its std against each baseline's mean plus its std (``margin.csv``; one block per
   SAC-GLAM+HER variant (the grid's, actor_lr 3e-5, and that with critic_llm_lr 3e-4), each against
   SAC-GLAM at its own learning rate, in the column ``sac_glam_variant``, when those runs exist).
   PPO-GLAM evaluates at the end of its rollouts (5,024 steps and so on), so evaluations are
   paired by their rank;
4. collapses: per seed, the evaluations at which the sampled policy (``train_sampled``) is back
   below ``COLLAPSE_BELOW`` (the random policy's is 0.072) after it had reached ``LEARNT_AT`` at an
   earlier one, in thousands of steps;
5. when PPO-GLAM+HER ran: the evaluations at which it is above (or below) PPO-GLAM by more than the
   seeds' spread (App. G asks whether HER helps PPO; both evaluate at the same steps);
6. runs continued past the comparison's budget (``--resume total_steps=...``, session 19): their
   evaluations after it, every set, mean ± std over seeds.

Tables 1-5 and the margin stop at the budget (100k steps, every algorithm's, unless ``--budget``
says otherwise): a run's first ``budget / EVAL_EVERY`` evaluations, so a run continued past it is
compared at equal steps. A variant whose seeds have not all reached the budget is left out (and
named), so every row compares whole runs.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
SETS = ["train", "train_distribution", "held_out", "train_sampled"]
TYPES = ["grasp", "grow", "grow-then-grasp", "grow-then-grow"]
VARIANTS = {
    "sac_glam_her": "SAC-GLAM+HER",
    "sac_glam": "SAC-GLAM",
    "ppo_glam": "PPO-GLAM",
    "ppo_glam_her": "PPO-GLAM+HER (App. G: clipped loss, aligned goals)",
    "sac_glam_her_actorlr3e-5": "SAC-GLAM+HER, actor_lr 3e-5",
    "sac_glam_actorlr3e-5": "SAC-GLAM, actor_lr 3e-5",
    "sac_glam_her_actorlr3e-5_criticllm3e-4": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4",
    "sac_glam_actorlr3e-5_criticllm3e-4": "SAC-GLAM, actor_lr 3e-5, critic_llm_lr 3e-4",
    "sac_glam_actorlr3e-5_criticllm3e-4_targetllm_typesuniform": "SAC-GLAM, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM, types-uniform batches",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_updates4": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, num_updates 4",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_dueling": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, dueling critic",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_success": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM, immediate-success head",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_nstep1": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM, n_step 1",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM, twins, types-uniform batches",
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform_noop": "SAC-GLAM+HER, actor_lr 3e-5, critic_llm_lr 3e-4, target LLM, twins, types-uniform batches, no-op twins",
}
# each SAC-GLAM+HER variant and its SAC-GLAM baseline: the first of those listed that ran to the budget
# (SAC-GLAM, the grid's, when none did)
HER_VARIANTS = {
    "sac_glam_her": ("sac_glam",),
    "sac_glam_her_actorlr3e-5": ("sac_glam_actorlr3e-5",),
    "sac_glam_her_actorlr3e-5_criticllm3e-4": ("sac_glam_actorlr3e-5_criticllm3e-4",),
    # no SAC-GLAM ran with the dueling heads or the target LLM alone: their baseline is
    # SAC-GLAM at the same rates
    "sac_glam_her_actorlr3e-5_criticllm3e-4_dueling": ("sac_glam_actorlr3e-5_criticllm3e-4",),
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm": ("sac_glam_actorlr3e-5_criticllm3e-4",),
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_success": ("sac_glam_actorlr3e-5_criticllm3e-4",),
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_nstep1": ("sac_glam_actorlr3e-5_criticllm3e-4",),
    # the twins' HER ablation keeps its other options (session 20; the twins need HER)
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform": (
        "sac_glam_actorlr3e-5_criticllm3e-4_targetllm_typesuniform",
        "sac_glam_actorlr3e-5_criticllm3e-4",
    ),
    "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform_noop": ("sac_glam_actorlr3e-5_criticllm3e-4",),
}
RANDOM_PER_TYPE = "| random | 0.13 | 0.13 | 0.001 | 0.02 |"
COLLAPSE_BELOW, LEARNT_AT = 0.1, 0.2  # sampled success, goal types uniform (table 4)
# every run evaluates every 5k steps (PPO-GLAM at the ends of its rollouts, the 20th at 100,480
# steps), so the budget cuts by rank, as the margin pairs them
EVAL_EVERY = 5000


def load(variant: str) -> dict[str, dict[str, list[dict]]]:
    """{seed name: {set: [evaluation rows in step order]}}."""
    runs = {}
    folder = HERE / "runs" / variant
    for run in sorted((folder if folder.exists() else HERE / "critic" / "runs" / variant).glob("seed*")):
        rows = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
        runs[run.name] = {s: sorted((r for r in rows if r["set"] == s), key=lambda r: r["env_steps"]) for s in SETS}
    return runs


def cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ± {np.std(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"


def above_by_spread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per evaluation (column; seeds in rows): whether a's mean minus its std is above b's mean plus
    its std, the issue's "ahead by more than the seeds' spread"."""
    return a.mean(0) - a.std(0) > b.mean(0) + b.std(0)


def collapses(evaluations: list[dict]) -> list[int]:
    """The steps (in thousands) of the evaluations below COLLAPSE_BELOW after one at LEARNT_AT."""
    learnt, fallen = False, []
    for e in evaluations:
        if learnt and e["success"] < COLLAPSE_BELOW:
            fallen.append(round(e["env_steps"] / 1000))
        learnt |= e["success"] >= LEARNT_AT
    return fallen


def main(budget: int) -> None:
    evaluations = budget // EVAL_EVERY
    data, past, short = {}, {}, []  # within the budget; after it (table 6), the seeds that went on
    for v in VARIANTS:
        if not (runs := load(v)):
            continue
        if min(len(r["train"]) for r in runs.values()) < evaluations:
            short.append(v)
        else:
            data[v] = {name: {s: rows[:evaluations] for s, rows in r.items()} for name, r in runs.items()}
        if after := {
            name: {s: rows[evaluations:] for s, rows in r.items()}
            for name, r in runs.items()
            if len(r["train"]) > evaluations
        }:
            past[v] = after
    if short:
        print(f"Left out, not every seed at {budget} steps: {', '.join(short)}\n")
    print("| variant | seeds | " + " | ".join(SETS) + " |")
    print("|---|---|" + "---|" * len(SETS))
    for v, runs in data.items():
        cells = [cell([r[s][-1]["success"] for r in runs.values()]) for s in SETS]
        print(f"| {VARIANTS[v]} | {', '.join(name[4:] for name in runs)} | " + " | ".join(cells) + " |")
    print()
    print("| variant | " + " | ".join(TYPES) + " |")
    print("|---|" + "---|" * len(TYPES))
    for v, runs in data.items():
        cells = []
        for t in TYPES:
            greedy = np.mean([r["train"][-1][f"success/{t}"] for r in runs.values()])
            sampled = np.mean([r["train_sampled"][-1][f"success/{t}"] for r in runs.values()])
            cells.append(f"{greedy:.2f} / {sampled:.2f}")
        print(f"| {VARIANTS[v]} | " + " | ".join(cells) + " |")
    print(RANDOM_PER_TYPE)
    print()
    print(
        f"| variant | collapses: evaluations (k steps) with sampled success < {COLLAPSE_BELOW} after one >= {LEARNT_AT}, "
        "per seed | in all |"
    )
    print("|---|---|---|")
    for v, runs in data.items():
        per_seed = [collapses(r["train_sampled"]) for r in runs.values()]
        cells = "; ".join(f"{name[4:]}: {', '.join(str(k) for k in c) or '-'}" for name, c in zip(runs, per_seed))
        print(f"| {VARIANTS[v]} | {cells} | {sum(map(len, per_seed))} |")
    print()

    rows = []
    curves = {
        s: {v: np.array([[e["success"] for e in r[s]] for r in runs.values()]) for v, runs in data.items()}
        for s in ("train", "train_distribution", "train_sampled")
    }
    pairs = {
        her: next((v for v in listed if v in data), "sac_glam") for her, listed in HER_VARIANTS.items() if her in data
    }
    pairs = {her: sac for her, sac in pairs.items() if sac in data and "ppo_glam" in data}
    for her_variant, sac_baseline in pairs.items():
        for s, curve in curves.items():
            steps = [e["env_steps"] for e in next(iter(data[her_variant].values()))[s]]
            her = curve[her_variant]
            baselines = {name: curve[v] for name, v in (("sac_glam", sac_baseline), ("ppo_glam", "ppo_glam"))}
            ahead = np.logical_and.reduce([above_by_spread(her, base) for base in baselines.values()])
            for i, step in enumerate(steps):
                row = {
                    "her_variant": her_variant,
                    "sac_glam_variant": sac_baseline,
                    "set": s,
                    "env_steps": step,
                    "her_mean": her[:, i].mean(),
                    "her_std": her[:, i].std(),
                }
                for name, base in baselines.items():
                    row[f"{name}_mean"], row[f"{name}_std"] = base[:, i].mean(), base[:, i].std()
                row["ahead_by_more_than_spread"] = bool(ahead[i])
                rows.append(row)
    if rows:  # at a longer budget, once a SAC-GLAM+HER variant and both baselines have reached it
        with open(
            HERE / ("margin.csv" if budget == 100_000 else f"margin_{budget // 1000}k.csv"), "w", newline=""
        ) as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows)
    for her_variant in pairs:
        for s in ("train", "train_distribution", "train_sampled"):
            behind = [
                r["env_steps"]
                for r in rows
                if r["her_variant"] == her_variant and r["set"] == s and not r["ahead_by_more_than_spread"]
            ]
            print(f"{VARIANTS[her_variant]}, {s}: mean - std is not above both baselines' mean + std at steps {behind}")
    if "ppo_glam_her" in data:  # App. G's question (5. in the docstring)
        for s, curve in curves.items():
            steps = [e["env_steps"] for e in next(iter(data["ppo_glam_her"].values()))[s]]
            her, plain = curve["ppo_glam_her"], curve["ppo_glam"]
            above = [k for k, yes in zip(steps, above_by_spread(her, plain)) if yes]
            below = [k for k, yes in zip(steps, above_by_spread(plain, her)) if yes]
            print(f"PPO-GLAM+HER against PPO-GLAM, {s}: above by more than the spread at {above}; below at {below}")
    if past:  # 6. in the docstring; at each evaluation, the seeds that reached it
        print()
        print("| variant | steps | seeds | " + " | ".join(SETS) + " | grasp (greedy) |")
        print("|---|---|---|" + "---|" * (len(SETS) + 1))
        for v, runs in past.items():
            for i in range(max(len(r["train"]) for r in runs.values())):
                reached = {name: r for name, r in runs.items() if len(r["train"]) > i}
                cells = [cell([r[s][i]["success"] for r in reached.values()]) for s in SETS]
                grasp = cell([r["train"][i]["success/grasp"] for r in reached.values()])
                steps = round(next(iter(reached.values()))["train"][i]["env_steps"] / 1000)
                print(
                    f"| {VARIANTS[v]} | {steps}k | {', '.join(name[4:] for name in reached)} | "
                    + " | ".join(cells)
                    + f" | {grasp} |"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=100_000, help="environment steps every compared run ran")
    main(parser.parse_args().budget)
