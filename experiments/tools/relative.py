"""Each variant's greedy success relative to a reference variant at equal environment steps
(``results --reference GROUP``).

For every group, evaluation set and metric, at every evaluation step that the group and the
reference both reached: the group's mean over seeds, its seed spread (std, min, max), the
reference's mean and std, and ``ratio`` = group mean / reference mean (``ratio_min`` /
``ratio_max``: the group's worst and best seed over the reference mean). ``final`` marks the last
step both reached (the equal step budget); ``meets_target`` says whether ``ratio`` >= ``target``
(issue 16: an autotelic agent should reach 80% of the goal-given agent's success on the training
goals within the same step budget). A ratio over a reference mean of 0 is left empty.
``relative.png`` draws the ratio of overall success against steps, the band from the worst to
the best seed.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np

COLUMNS = [
    "group",
    "reference",
    "set",
    "metric",
    "env_steps",
    "final",
    "seeds",
    "mean",
    "std",
    "min",
    "max",
    "reference_seeds",
    "reference_mean",
    "reference_std",
    "ratio",
    "ratio_min",
    "ratio_max",
    "target",
    "meets_target",
]


def relative_rows(data: dict[tuple[str, str], dict[str, dict]], reference: str, target: float) -> list[dict]:
    """Rows of the relative table from ``{(set, metric): results.curves(...)}``.

    Raises when ``reference`` is not one of the groups (the message lists them)."""
    groups = sorted({g for curves in data.values() for g in curves})
    if reference not in groups:
        raise ValueError(
            f"--reference {reference!r} is not one of the groups found: {', '.join(groups)} "
            "(a group is a variant folder, the one above seed<k>)"
        )
    rows, unmatched = [], set()
    for (eval_set, metric), curves in data.items():
        if reference not in curves:
            continue
        ref = curves[reference]
        ref_at = {int(t): i for i, t in enumerate(ref["steps"])}
        for group, d in sorted(curves.items()):
            common = [(i, ref_at[int(t)]) for i, t in enumerate(d["steps"]) if int(t) in ref_at]
            if not common:
                if group not in unmatched:  # once per group, not per set and metric
                    warnings.warn(
                        f"group {group!r} shares no evaluation step with the reference {reference!r} "
                        f"({eval_set}, {metric}): it is missing from the relative table there (were "
                        "they run with the same eval_every and num_envs?)",
                        stacklevel=2,
                    )
                unmatched.add(group)
                continue
            for k, (i, j) in enumerate(common):
                values, ref_values = d["values"][:, i], ref["values"][:, j]
                values, ref_values = values[~np.isnan(values)], ref_values[~np.isnan(ref_values)]
                mean, ref_mean = float(values.mean()), float(ref_values.mean())
                ratio = [v / ref_mean if ref_mean > 0 else float("nan") for v in (mean, values.min(), values.max())]
                rows.append(
                    {
                        "group": group,
                        "reference": reference,
                        "set": eval_set,
                        "metric": metric,
                        "env_steps": int(d["steps"][i]),
                        "final": k == len(common) - 1,
                        "seeds": len(values),
                        "mean": mean,
                        "std": float(values.std()),
                        "min": float(values.min()),
                        "max": float(values.max()),
                        "reference_seeds": len(ref_values),
                        "reference_mean": ref_mean,
                        "reference_std": float(ref_values.std()),
                        "ratio": ratio[0],
                        "ratio_min": ratio[1],
                        "ratio_max": ratio[2],
                        "target": target,
                        "meets_target": None if np.isnan(ratio[0]) else bool(ratio[0] >= target),
                    }
                )
    return rows


def _cell(value) -> str | int:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return round(value, 4)
    return value


def write_relative(rows: list[dict], out: Path) -> None:
    """``relative.csv`` (every common evaluation step), ``relative_final.csv`` (the final rows) and
    ``relative.png`` (the ratio of overall success vs steps per evaluation set, with the target)."""
    for name, chosen in [("relative.csv", rows), ("relative_final.csv", [r for r in rows if r["final"]])]:
        with open(Path(out) / name, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            writer.writerows([_cell(row[c]) for c in COLUMNS] for row in chosen)
    _plot([r for r in rows if r["metric"] == "success" and r["group"] != r["reference"]], Path(out) / "relative.png")


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({r["set"] for r in rows}, key=lambda s: (s != "train", s))  # training goals first
    fig, axes = plt.subplots(1, max(len(sets), 1), figsize=(6 * max(len(sets), 1), 4), squeeze=False)
    for ax, eval_set in zip(axes[0], sets):
        chosen = [r for r in rows if r["set"] == eval_set]
        for group in sorted({r["group"] for r in chosen}):
            points = [r for r in chosen if r["group"] == group]
            steps = [r["env_steps"] for r in points]
            ax.plot(
                steps,
                [r["ratio"] for r in points],
                marker="o",
                markersize=3,  # a lone point shows too
                label=f"{group} (n={points[-1]['seeds']})",
            )
            ax.fill_between(steps, [r["ratio_min"] for r in points], [r["ratio_max"] for r in points], alpha=0.2)
        ax.axhline(1.0, color="0.35", linewidth=1)
        ax.axhline(
            chosen[0]["target"], color="0.35", linewidth=1, linestyle="--", label=f"target {chosen[0]['target']:g}"
        )
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"success / {chosen[0]['reference']}'s")
        ax.set_title(f"{eval_set} goals (band: worst and best seed)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
