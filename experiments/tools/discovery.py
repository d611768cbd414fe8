"""An autotelic agent's goal discovery over time, aggregated over seeds (``results --discovery``).

Three quantities: ``discovered`` (goals in the agent's memory, whatever set),
``discovered_train_fraction`` (the share of the 8,470 training goals) and
``discovered_task_fraction`` (the share of the run's task set, its config's ``goals``).

Where a run records them, best first:

1. the step each goal was first reported at, which makes the curve exact at every step:
   ``autotelic.jsonl``'s ``new`` entries ({goal: step}, logged since issue 16's report), or else
   the goal memory in the run's checkpoint (``first_seen`` of ``AutotelicGoals``; runs logged
   before; read with ``weights_only=True``, so it runs no code); either covers the run up to the
   step it was written at;
2. the scalars logged every ``log_every`` steps through TorchRL's ``CSVLogger`` (always on):
   ``logs/scalars/autotelic/discovered.csv``, ``discovered_train_fraction.csv``,
   ``discovered_task_fraction.csv``, for the steps after (1) ends.

Wall seconds come from ``logs/scalars/time/wall_seconds.csv`` (linear between its steps). The
memory starts empty: every curve starts at (0 steps, 0 goals). Scalar files are appended to on
resume, so a step logged twice keeps its last value.

Per group (variant): when every seed has (1), the curve has a point at every step where a seed's
count changes (up to the shortest seed's coverage), else the logged steps only; each point has
the mean, std, min and max over the seeds that reach it, and ``exact`` says whether all of them
come from (1). Written as ``discovery.csv`` and ``discovery.png``.
"""

from __future__ import annotations

import csv
import json
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from torchrl_glam.envs.playground import GoalCatalogue
from torchrl_glam.training.checkpoint import CHECKPOINT_NAME, PREVIOUS_NAME, CheckpointError, read_checkpoint

#: quantity -> the scalar file (under ``logs/scalars``) it is logged to
QUANTITIES = {
    "discovered": "autotelic/discovered.csv",
    "discovered_train_fraction": "autotelic/discovered_train_fraction.csv",
    "discovered_task_fraction": "autotelic/discovered_task_fraction.csv",
}
WALL_SECONDS = "time/wall_seconds.csv"
#: the quantity whose logged steps are a run's logged steps
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


def read_records(path: Path, required: set[str], check=None) -> list[tuple[int, dict]]:
    """The JSON objects of a run's ``.jsonl`` log that hold the ``required`` keys, with their line
    numbers. A torn or malformed line (a run killed while writing it, bytes that are not UTF-8, a
    record ``check(entry)`` finds fault with: it returns what is wrong, or ``None``) is skipped with
    a warning naming the file and line; the rest of the log still counts."""
    records = []
    for number, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        line = raw.decode("utf-8", errors="replace")
        try:
            entry = json.loads(raw.decode("utf-8"))
            if not isinstance(entry, dict) or not required <= set(entry):
                raise ValueError(f"not a record with {', '.join(sorted(required))}")
            problem = check(entry) if check is not None else None
            if problem:
                raise ValueError(problem)
        except ValueError as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            warnings.warn(f"{path}:{number}: skipping a torn or malformed line ({err}): {line[:80]!r}", stacklevel=3)
            continue
        records.append((number, entry))
    return records


def first_seen_from_log(path: Path, catalogue: GoalCatalogue) -> tuple[np.ndarray, int] | None:
    """From ``autotelic.jsonl``: the first-report step of every catalogue goal (-1: not
    discovered) and the step the log covers, or ``None`` when its lines have no ``new`` entries
    (a run logged before they existed)."""
    first_seen, covered, found = np.full(len(catalogue), -1, dtype=np.int64), 0, False
    for number, entry in read_records(path, {"env_steps"}):
        new = entry.get("new")
        if new is None:
            continue
        try:
            if not isinstance(new, dict):
                raise TypeError("'new' is not a mapping of goals to steps")
            steps = int(entry["env_steps"])
        except (ValueError, TypeError):
            warnings.warn(f"{path}:{number}: skipping a malformed line: {str(entry)[:80]!r}", stacklevel=2)
            continue
        found, covered = True, max(covered, steps)
        for goal, step in new.items():
            goal_id = catalogue.goal_to_id.get(goal)
            if goal_id is None:
                warnings.warn(f"{path}:{number}: {goal!r} is not a goal of the catalogue; left out", stacklevel=2)
            elif first_seen[goal_id] < 0 or step < first_seen[goal_id]:
                first_seen[goal_id] = step
    return (first_seen, covered) if found else None


def first_seen_from_checkpoint(run: Path, catalogue: GoalCatalogue) -> tuple[np.ndarray, int] | None:
    """From the run's checkpoint (the previous one if the newest is unreadable): its goal
    memory's first-report steps and the step it was saved at, or ``None`` (no checkpoint, not an
    autotelic run's, or none readable: warned). Reads only: the run may still be writing."""
    state, errors = None, []
    for name in (CHECKPOINT_NAME, PREVIOUS_NAME):
        if (run / name).exists():
            try:
                state = read_checkpoint(run / name)
                break
            except CheckpointError as err:  # unreadable or unsafe: the report goes on without it
                errors.append(f"{run / name}: {type(err).__name__}: {err}")
    if errors and state is None:
        warnings.warn(
            f"{run}: no checkpoint's goal memory can be read ({'; '.join(errors)}); using the logged steps only",
            stacklevel=2,
        )
    elif errors:
        warnings.warn(
            f"{run}: {errors[0]}; the discovery curve falls back to the previous checkpoint's goal memory", stacklevel=2
        )
    # AutotelicGoals keeps its memory in its extra state (torch's "_extra_state" state-dict entry)
    extra = (state or {}).get("autotelic", {}).get("_extra_state")
    if extra is None:
        return None
    first_seen = extra["memory"]["first_seen"].numpy()
    if len(first_seen) != len(catalogue):
        warnings.warn(
            f"{run}: the checkpoint's goal memory covers {len(first_seen)} goals, the catalogue "
            f"{len(catalogue)}; using the logged steps only",
            stacklevel=2,
        )
        return None
    return first_seen, int(extra["env_steps"])


def load_discovery(run: Path, config: dict, catalogue: GoalCatalogue) -> dict | None:
    """A run's discovery records (see the module docstring), or ``None`` for a run that is not
    autotelic (neither ``autotelic.jsonl`` nor the ``autotelic/`` scalars)."""
    run = Path(run)
    scalars = run / "logs" / "scalars"
    if not (scalars / MARKER).exists() and not (run / "autotelic.jsonl").exists():
        return None
    logged = {name: read_scalar(scalars / file) for name, file in QUANTITIES.items() if (scalars / file).exists()}
    for values in logged.values():
        values.setdefault(0, 0.0)  # the memory starts empty
    seconds = read_scalar(scalars / WALL_SECONDS) if (scalars / WALL_SECONDS).exists() else {}
    seconds.setdefault(0, 0.0)
    exact = None
    if (run / "autotelic.jsonl").exists():
        exact = first_seen_from_log(run / "autotelic.jsonl", catalogue)
    if exact is None:
        exact = first_seen_from_checkpoint(run, catalogue)
    task_ids = None
    if config.get("env.goals") in ("train", "simplified", "held_out"):
        task_ids = catalogue.goal_set(config["env.goals"])
    return {
        "logged": logged,
        "seconds": seconds,
        "first_seen": None if exact is None else exact[0],
        "exact_until": None if exact is None else exact[1],
        "train_ids": catalogue.goal_set("train"),
        "task_ids": task_ids,
        "logged_steps": set(logged.get(MARKER_NAME, {0: 0.0})),
    }


def _exact_values(record: dict, steps: np.ndarray) -> dict[str, np.ndarray]:
    """Each quantity at ``steps`` from the first-report steps: goals reported before the step."""
    first_seen = record["first_seen"]
    out = {}
    for name, ids in [
        ("discovered", None),
        ("discovered_train_fraction", record["train_ids"]),
        ("discovered_task_fraction", record["task_ids"]),
    ]:
        if name != "discovered" and ids is None:
            continue
        chosen = np.sort(first_seen[first_seen >= 0] if ids is None else first_seen[ids][first_seen[ids] >= 0])
        count = np.searchsorted(chosen, steps, side="left").astype(float)  # reported at a step < t
        out[name] = count if ids is None else count / len(ids)
    return out


def discovery_curves(runs: list[dict], catalogue: GoalCatalogue | None = None) -> dict[str, dict]:
    """Per group of autotelic runs (each ``run`` with ``"run"``, ``"group"``, ``"config"``):
    ``steps``, ``seconds``, ``exact`` (bool per step: every seed's value from first-report
    steps), ``seeds_in_group`` and per quantity a [seeds, steps] array (NaN where a seed has no
    value: it has not reached the step, or did not log it). Non-autotelic groups are left out."""
    catalogue = catalogue or GoalCatalogue.default()
    by_group: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        record = load_discovery(run["run"], run.get("config", {}), catalogue)
        if record is not None:
            by_group[run["group"]].append(record)
    out = {}
    for group, members in sorted(by_group.items()):
        steps = set().union(*(m["logged_steps"] for m in members))
        steps |= {m["exact_until"] for m in members if m["first_seen"] is not None}
        if all(m["first_seen"] is not None for m in members):  # a point wherever a seed's count changes
            until = min(m["exact_until"] for m in members)
            steps |= {int(f) + 1 for m in members for f in m["first_seen"] if 0 <= f < until}
        steps = np.array(sorted(steps))
        d = {"steps": steps, "seeds_in_group": len(members)}
        exact_rows, seconds = [], []
        values: dict[str, list[np.ndarray]] = {name: [] for name in QUANTITIES}
        for m in members:
            covered = (steps <= m["exact_until"]) if m["first_seen"] is not None else np.zeros(len(steps), bool)
            exact = _exact_values(m, steps) if m["first_seen"] is not None else {}
            for name in QUANTITIES:
                logged = m["logged"].get(name, {})
                row = np.array([logged.get(int(t), np.nan) for t in steps], dtype=float)
                if name in exact:
                    row = np.where(covered, exact[name], row)
                values[name].append(row)
            exact_rows.append(covered)
            known = sorted(m["seconds"].items())
            times = np.interp(steps, [t for t, _ in known], [s for _, s in known])
            seconds.append(np.where(steps <= known[-1][0], times, np.nan))
        for name, rows in values.items():
            rows = np.array(rows)
            if not np.isnan(rows).all():
                d[name] = rows
        reached = ~np.isnan(d[MARKER_NAME]) if MARKER_NAME in d else ~np.isnan(d["discovered"])
        d["exact"] = np.array([all(e[i] for e, r in zip(exact_rows, reached[:, i]) if r) for i in range(len(steps))])
        with warnings.catch_warnings():  # a step no seed has wall seconds for stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            d["seconds"] = np.nanmean(np.array(seconds), 0)
        out[group] = d
    return out


def _stats(values: np.ndarray) -> tuple[np.ndarray, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, 0), np.nanstd(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)


def _number(value: float, digits: int) -> str:
    return "" if np.isnan(value) else str(round(float(value), digits))


def write_discovery(runs: list[dict], out: Path) -> dict[str, dict]:
    """Writes ``discovery.csv`` (one row per group, quantity and step: mean, std, min, max over
    the seeds that reach it, how many, and whether exact) and ``discovery.png`` (the discovered
    shares of the training goals and of the task set, and the goals discovered, vs environment
    steps, mean ± std). Raises when no run is autotelic."""
    data = discovery_curves(runs)
    if not data:
        raise FileNotFoundError(
            f"--discovery: none of the {len(runs)} runs has autotelic logs (autotelic.jsonl or "
            f"logs/scalars/{MARKER}); it needs runs of an autotelic agent (autotelic=lp or uniform), or "
            "leave out --discovery"
        )
    out = Path(out)
    with open(out / "discovery.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(
            [
                "group",
                "quantity",
                "env_steps",
                "wall_seconds",
                "mean",
                "std",
                "min",
                "max",
                "seeds",
                "seeds_in_group",
                "exact",
            ]
        )
        for group, d in data.items():
            for name in QUANTITIES:
                if name not in d:
                    continue
                digits = 2 if name == "discovered" else 6
                mean, std, low, high = _stats(d[name])
                seeds = (~np.isnan(d[name])).sum(0)
                for i, step in enumerate(d["steps"]):
                    if seeds[i]:
                        rows.writerow(
                            [
                                group,
                                name,
                                int(step),
                                _number(d["seconds"][i], 1),
                                _number(mean[i], digits),
                                _number(std[i], digits),
                                _number(low[i], digits),
                                _number(high[i], digits),
                                int(seeds[i]),
                                d["seeds_in_group"],
                                bool(d["exact"][i]),
                            ]
                        )
    _plot(data, out / "discovery.png")
    return data


def _plot(data: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("discovered_train_fraction", "share of the 8,470 training goals discovered"),
        ("discovered_task_fraction", "share of the task set discovered"),
        ("discovered", "goals discovered (any set)"),
    ]
    panels = [p for p in panels if any(p[0] in d for d in data.values())]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (name, title) in zip(axes[0], panels):
        for group, d in data.items():
            if name not in d:
                continue
            mean, std, _, _ = _stats(d[name])
            keep = ~np.isnan(mean)
            # first-report steps: the count is a step function; logged points: joined by lines
            style = "steps-post" if d["exact"][keep].all() else "default"
            ax.plot(d["steps"][keep], mean[keep], drawstyle=style, label=f"{group} (n={d['seeds_in_group']})")
            ax.fill_between(
                d["steps"][keep],
                (mean - std)[keep],
                (mean + std)[keep],
                alpha=0.2,
                step="post" if style == "steps-post" else None,
            )
        # discovery is fast and then saturates (the task set is small): a log axis shows both
        ax.set_xscale("symlog", linthresh=100)
        ax.set_xlabel("environment steps (log scale above 100)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
