"""An autotelic agent's goal discovery over time, aggregated over seeds (``results --discovery``).

Where the runs record it: every ``log_every`` steps an autotelic run logs, through TorchRL's
``CSVLogger`` (always on), ``logs/scalars/autotelic/discovered.csv`` (goals in its memory, any
set), ``autotelic/discovered_train_fraction.csv`` (of the 8,470 training goals) and, when the task
set is known, ``autotelic/discovered_task_fraction.csv``; the wall seconds at each step are in
``logs/scalars/time/wall_seconds.csv``. Those files are ``step,value`` lines, appended to on
resume (a step logged twice keeps its last value). The memory starts empty, so each curve starts
at (0 steps, 0 goals).

Per group (variant) and quantity: mean, std, min and max over the seeds at every logged step,
and how many seeds each point averages; ``discovery.csv`` and ``discovery.png``.
"""
from __future__ import annotations

import csv
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

#: quantity -> the scalar file (under ``logs/scalars``) it is read from
QUANTITIES = {
    "discovered": "autotelic/discovered.csv",
    "discovered_train_fraction": "autotelic/discovered_train_fraction.csv",
    "discovered_task_fraction": "autotelic/discovered_task_fraction.csv",
}
WALL_SECONDS = "time/wall_seconds.csv"
#: the quantity whose file marks an autotelic run (and whose steps are a curve's steps)
MARKER_NAME = "discovered_train_fraction"
MARKER = QUANTITIES[MARKER_NAME]


def read_scalar(path: Path) -> dict[int, float]:
    """A ``CSVLogger`` scalar file as {step: value}; a step written twice (a resumed run) keeps its
    last value; a torn or malformed line is skipped with a warning naming the file and line."""
    values: dict[int, float] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            step, value = line.split(",")
            values[int(step)] = float(value)
        except ValueError:
            warnings.warn(f"{path}:{number}: skipping a torn or malformed line: {line[:80]!r}", stacklevel=2)
    return values


def load_discovery(run: Path) -> dict[str, dict[int, float]] | None:
    """A run's discovery scalars {quantity: {step: value}} plus ``"wall_seconds"``, or ``None`` for
    a run that is not autotelic (no ``autotelic/discovered_train_fraction.csv``)."""
    scalars = Path(run) / "logs" / "scalars"
    if not (scalars / MARKER).exists():
        return None
    out = {name: read_scalar(scalars / file) for name, file in QUANTITIES.items() if (scalars / file).exists()}
    out["wall_seconds"] = read_scalar(scalars / WALL_SECONDS) if (scalars / WALL_SECONDS).exists() else {}
    return out


def discovery_curves(runs: list[dict]) -> dict[str, dict]:
    """Per group of autotelic runs (``run["run"]``, ``run["group"]``): ``steps``, ``seconds`` (mean
    over the seeds that logged the step), ``seeds`` (how many seeds each step averages, int
    array) and per quantity a [seeds, steps] array (NaN where a seed has no point).

    Groups without autotelic logs (the goal-given agent) are left out."""
    by_group: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        logged = load_discovery(run["run"])
        if logged is not None:
            by_group[run["group"]].append(logged)
    out = {}
    for group, members in sorted(by_group.items()):
        for logged in members:  # the memory starts empty: every curve starts at (0 steps, 0 goals)
            for name in QUANTITIES:
                if name in logged:
                    logged[name].setdefault(0, 0.0)
            logged["wall_seconds"].setdefault(0, 0.0)
        steps = sorted(set().union(*(m[MARKER_NAME] for m in members)))
        d = {"steps": np.array(steps)}
        for name in QUANTITIES:
            if any(name in m for m in members):
                d[name] = np.array([[m.get(name, {}).get(t, np.nan) for t in steps] for m in members], dtype=float)
        seconds = np.array([[m["wall_seconds"].get(t, np.nan) if t in m[MARKER_NAME] else np.nan for t in steps]
                            for m in members], dtype=float)
        with warnings.catch_warnings():  # a step no seed has wall seconds for stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            d["seconds"] = np.nanmean(seconds, 0)
        d["seeds"] = (~np.isnan(d[MARKER_NAME])).sum(0)
        d["seeds_in_group"] = len(members)
        out[group] = d
    return out



def _stats(values: np.ndarray) -> tuple[np.ndarray, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, 0), np.nanstd(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)


def _number(value: float, digits: int) -> str:
    return "" if np.isnan(value) else str(round(float(value), digits))


def write_discovery(runs: list[dict], out: Path) -> dict[str, dict]:
    """Writes ``discovery.csv`` (one row per group, quantity and logged step: mean, std, min, max
    over seeds, seeds) and ``discovery.png`` (the discovered share of the training goals and the
    discovered goals vs environment steps, mean ± std). Raises when no run is autotelic."""
    data = discovery_curves(runs)
    if not data:
        raise FileNotFoundError(
            f"--discovery: none of the {len(runs)} runs has autotelic logs (logs/scalars/{MARKER}); "
            "it needs runs of an autotelic agent (autotelic=lp or uniform), or leave out --discovery")
    out = Path(out)
    with open(out / "discovery.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["group", "quantity", "env_steps", "wall_seconds", "mean", "std", "min", "max", "seeds",
                       "seeds_in_group"])
        for group, d in data.items():
            for name in QUANTITIES:
                if name not in d:
                    continue
                digits = 2 if name == "discovered" else 6
                mean, std, low, high = _stats(d[name])
                seeds = (~np.isnan(d[name])).sum(0)
                for i, step in enumerate(d["steps"]):
                    if seeds[i]:
                        rows.writerow([group, name, int(step), _number(d["seconds"][i], 1), _number(mean[i], digits),
                                       _number(std[i], digits), _number(low[i], digits), _number(high[i], digits),
                                       int(seeds[i]), d["seeds_in_group"]])
    _plot(data, out / "discovery.png")
    return data


def _plot(data: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("discovered_train_fraction", "share of the 8,470 training goals discovered"),
              ("discovered", "goals discovered (any set)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (name, title) in zip(axes[0], panels):
        for group, d in data.items():
            if name not in d:
                continue
            mean, std, _, _ = _stats(d[name])
            ax.plot(d["steps"], mean, label=f"{group} (n={d['seeds_in_group']})")
            ax.fill_between(d["steps"], mean - std, mean + std, alpha=0.2)
        ax.set_xlabel("environment steps")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
