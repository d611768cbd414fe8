"""Aggregate run directories into the paper's Figure 2 panels and a CSV summary.

    python -m experiments.tools.results runs/figure2 --out experiments/figure2

Every run directory below the given paths (a folder holding ``evaluations.jsonl``) is one seed;
runs are grouped by their variant (the folder above ``seed<k>``, or ``--group-by config``: the
config without seed and run_dir). For each group and evaluation set (training / held-out goals):
greedy success against environment steps and against wall seconds, mean ± std over seeds, overall
and per goal type. Writes ``success_vs_steps.png``, ``success_vs_seconds.png``,
``success_by_goal_type.png``, ``curves.csv`` (every point), ``summary.csv`` (final values) and
``environments.csv`` (what each run ran on: its ``environment.json``; runs on different ones agree
statistically, not to the digit).
A seed that stopped early does not cut its group's curves: every point says how many seeds it
averages (``seeds``), and a warning names the group; torn lines of ``evaluations.jsonl`` are
skipped with a warning naming the file.

Options:

* ``--level random=0.32 --level zero_shot=0.0``: named constant success levels (a baseline's
  success rate) drawn as horizontal lines on every success panel and listed in ``levels.csv``;
  ``NAME@SET=VALUE`` draws one only on that evaluation set's panels (``zero_shot@held_out=0.06``).
* ``--reference GROUP``: ``relative.csv`` / ``relative_final.csv``, each group's success relative
  to GROUP's at equal environment steps (``experiments/tools/relative.py``; ``--target``).
* ``--discovery``: an autotelic agent's discovered goals over time, ``discovery.csv`` /
  ``discovery.png`` (``experiments/tools/discovery.py``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.tools.discovery import read_records, write_discovery
from experiments.tools.relative import relative_rows, write_relative
from torchrl_glam.algorithms import SCRIPTS
from torchrl_glam.envs.playground import GOAL_TYPES
from torchrl_glam.training.config import flatten_sections
from torchrl_glam.training.config.options import OPTIONS_0_3_DEFAULTS, OPTIONS_PREFIX, declared_only
from torchrl_glam.training.eval_sets import EVAL_SETS, eval_set_title
from torchrl_glam.training.provenance import environment_summary, read_environment


@dataclass(frozen=True)
class Level:
    """A named constant success rate drawn on the success panels (``eval_set``: only on that
    set's panels; ``None``: on all)."""

    name: str
    value: float
    eval_set: str | None = None

    @classmethod
    def parse(cls, text: str) -> Level:
        """``NAME=VALUE`` or ``NAME@SET=VALUE``, VALUE a success rate in [0, 1]."""
        match = re.fullmatch(r"\s*([\w.+-]+)(?:@(\w+))?\s*=\s*(\S+)\s*", text)
        value = None
        if match:
            try:
                value = float(match[3])
            except ValueError:
                pass
        if value is None or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(
                f"level {text!r}: write NAME=VALUE or NAME@SET=VALUE with VALUE a success rate "
                "in [0, 1], e.g. --level random=0.32 or --level zero_shot@held_out=0.06"
            )
        return cls(match[1], value, match[2])


def _check_levels(levels: list[Level], sets: list[str]) -> None:
    seen = set()
    for level in levels:
        if level.eval_set is not None and level.eval_set not in sets:
            raise ValueError(
                f"level {level.name}@{level.eval_set}: no evaluation set {level.eval_set!r} in "
                f"these runs (they have {', '.join(sets)})"
            )
        key = (level.name, level.eval_set)
        if key in seen:
            raise ValueError(f"level {level.name!r} given twice for {level.eval_set or 'every set'}")
        seen.add(key)


def find_runs(paths: list[str | Path]) -> list[Path]:
    runs = []
    for path in paths:
        path = Path(path)
        if (path / "evaluations.jsonl").exists():
            runs.append(path)
        runs.extend(p.parent for p in sorted(path.rglob("evaluations.jsonl")) if p.parent != path)
    return sorted(set(runs))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _evaluation_problem(entry: dict) -> str | None:
    """What makes an ``evaluations.jsonl`` record unusable, or ``None``."""
    if not isinstance(entry["env_steps"], int) or isinstance(entry["env_steps"], bool):
        return f"env_steps {entry['env_steps']!r} is not an integer"
    if not isinstance(entry["set"], str):
        return f"set {entry['set']!r} is not a name"
    if not _is_number(entry.get("wall_seconds")):
        return f"wall_seconds {entry.get('wall_seconds')!r} is not a number"
    bad = [key for key, value in entry.items() if key.startswith("success") and not _is_number(value)]
    return f"{', '.join(bad)} not a number" if bad else None


def load_run(run: Path) -> dict:
    """A run's evaluations and config. A torn line (a run killed while writing it) is skipped with a
    warning naming the file and line; the rest of the run still counts. A config.json that cannot
    be read raises a ``ValueError`` naming it."""
    evaluations = [
        entry for _, entry in read_records(run / "evaluations.jsonl", {"env_steps", "set"}, _evaluation_problem)
    ]
    config = {}
    if (run / "config.json").exists():
        try:
            config = json.loads((run / "config.json").read_bytes().decode("utf-8"))
        except ValueError as err:
            raise ValueError(f"{run / 'config.json'} is not readable JSON ({err})") from None
        if not isinstance(config, dict):
            raise ValueError(f"{run / 'config.json'} holds a {type(config).__name__}, not a config")

    return {
        "run": run,
        "config": config_by_path(config),
        "evaluations": evaluations,
        "environment": read_environment(run),
    }


def config_by_path(config: dict) -> dict:
    """A run's config.json as ``{path: value}``: by section (``to_dict()``), or by field name as
    torchrl_glam 0.1 and 0.2 wrote it (the committed runs; the library no longer reads it), 0.1.0's
    names renamed. Runs of either kind then group together."""
    if any(isinstance(value, dict) for value in config.values()):
        return _declared_options_only(flatten_sections(config))

    def knows(script, name):
        return (
            script.config_class.has_field(name)
            or name in script.config_class.FORMER_NAMES
            or name in OPTIONS_0_3_DEFAULTS
        )

    config_class = next(
        (s for s in SCRIPTS.values() if all(knows(s, k) for k in config)), SCRIPTS["sac_glam"]
    ).config_class
    config = {config_class.FORMER_NAMES.get(k, k): v for k, v in config.items()}
    return _declared_options_only(
        {
            config_class.path_of(k)
            if config_class.has_field(k)
            else OPTIONS_PREFIX + k
            if k in OPTIONS_0_3_DEFAULTS
            else k: v
            for k, v in config.items()
        }
    )


def _declared_options_only(flat: dict) -> dict:
    """``flat`` as the library reads a saved config: 0.3.0's options of other environments dropped
    (``declared_only``) and SAC-GLAM's values of earlier versions mapped (``saved_values``), so that
    runs of every version group together."""
    return SCRIPTS["sac_glam"].config_class.saved_values(declared_only(flat))


def _load_runs(paths: list[Path]) -> list[dict]:
    """The runs that can be read; each one that cannot is skipped with a warning naming why."""
    runs = []
    for path in paths:
        try:
            runs.append(load_run(path))
        except (OSError, ValueError) as err:
            warnings.warn(f"skipping run {path}: {err}", stacklevel=3)
    return runs


def _goal_types(runs: list[dict]) -> list[str]:
    """The goal types the runs' evaluations report ("success/<type>"): Playground-Text's in its
    order, then any other environment's in the order they first appear."""
    seen = dict.fromkeys(
        key.removeprefix("success/")
        for run in runs
        for entry in run["evaluations"]
        for key in entry
        if key.startswith("success/")
    )
    return [t for t in GOAL_TYPES if t in seen] + [t for t in seen if t not in GOAL_TYPES]


def group_of(run: dict, group_by: str) -> str:
    if group_by == "config":
        config = {k: v for k, v in run["config"].items() if k not in ("run.seed", "run.run_dir")}
        return json.dumps(config, sort_keys=True)
    path = run["run"]
    return path.parent.name if path.name.startswith("seed") else path.name


def curves(runs: list[dict], eval_set: str, metric: str) -> dict[str, dict]:
    """Per group: steps, seconds, the metric per seed (NaN where a seed has no point: it stopped
    early or is still running) and how many seeds each point averages ("counts").

    A group whose seeds have unequal lengths is reported with a warning rather than silently cut
    to the shortest seed."""
    out = {}
    by_group: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_group[run["group"]].append(run)
    for group, members in by_group.items():
        series = []
        for run in members:
            points = {
                e["env_steps"]: (e["wall_seconds"], e.get(metric))
                for e in run["evaluations"]
                if e["set"] == eval_set and e.get(metric) is not None
            }
            if points:
                series.append(points)
        if not series:
            continue
        steps = sorted(set.union(*(set(s) for s in series)))
        values = np.array([[s[t][1] if t in s else np.nan for t in steps] for s in series], dtype=float)
        seconds = np.array([[s[t][0] if t in s else np.nan for t in steps] for s in series], dtype=float)
        counts = (~np.isnan(values)).sum(0)
        if (counts < len(series)).any():
            lengths = ", ".join(f"{len(s)} points up to {max(s)} steps" for s in series)
            warnings.warn(
                f"group {group!r} ({eval_set}, {metric}): its {len(series)} seeds have unequal lengths "
                f"({lengths}); points where a seed is missing average fewer seeds (the 'seeds' column)",
                stacklevel=2,
            )
        out[group] = {"steps": np.array(steps), "seconds": np.nanmean(seconds, 0), "values": values, "counts": counts}
    return out


def plot(data: dict[str, dict], x: str, title: str, path: Path, ax=None, levels: list[Level] = ()) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6, 4))
    for group, d in sorted(data.items()):
        mean, std = np.nanmean(d["values"], 0), np.nanstd(d["values"], 0)
        xs = d["steps"] if x == "steps" else d["seconds"]
        ax.plot(xs, mean, label=f"{group} (n={len(d['values'])})")
        ax.fill_between(xs, mean - std, mean + std, alpha=0.2)
    for k, level in enumerate(levels):  # constant baselines, dashed, in the legend with their value
        ax.axhline(
            level.value,
            color="0.35",
            linewidth=1,
            linestyle=["--", ":", "-.", (0, (5, 1, 1, 1))][k % 4],
            label=f"{level.name} = {level.value:g}",
        )
    ax.set_xlabel("environment steps" if x == "steps" else "wall seconds")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if own:
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def aggregate(
    paths: list[str | Path],
    out: str | Path,
    group_by: str = "variant",
    levels: list[Level] = (),
    reference: str | None = None,
    target: float = 0.8,
    discovery: bool = False,
) -> Path:
    """Writes the figures and CSV files of the module docstring for the runs under ``paths``
    into ``out``; ``levels``, ``reference`` (with ``target``) and ``discovery``: the options."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _load_runs(find_runs(paths))
    if not runs:
        raise FileNotFoundError(f"no run directories (with evaluations.jsonl) under {[str(p) for p in paths]}")
    for run in runs:
        run["group"] = group_of(run, group_by)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    logged = {e["set"] for run in runs for e in run["evaluations"]}
    sets = [s for s in EVAL_SETS if s in logged] + sorted(logged - set(EVAL_SETS))  # the library's sets first
    levels = list(levels)
    _check_levels(levels, sets)
    environments = {run["config"].get("env.name") for run in runs}
    environment = environments.pop() if len(environments) == 1 else None

    def levels_of(eval_set: str) -> list[Level]:
        return [level for level in levels if level.eval_set in (None, eval_set)]

    for x, name in [("steps", "success_vs_steps.png"), ("seconds", "success_vs_seconds.png")]:
        fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4), squeeze=False)
        for ax, eval_set in zip(axes[0], sets):
            title = eval_set_title(eval_set, environment) if eval_set in EVAL_SETS else f"{eval_set} goals"
            plot(curves(runs, eval_set, "success"), x, title, out / name, ax=ax, levels=levels_of(eval_set))
            if levels_of(eval_set):  # each panel names its own level lines
                ax.legend(fontsize=7)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)

    types = _goal_types(runs)
    fig, axes = plt.subplots(1, max(len(types), 1), figsize=(5 * max(len(types), 1), 4), squeeze=False)
    type_set = sets[0] if "train" not in sets else "train"
    for ax, goal_type in zip(axes[0], types):
        plot(
            curves(runs, type_set, f"success/{goal_type}"),
            "steps",
            goal_type,
            out / "success_by_goal_type.png",
            ax=ax,
            levels=levels_of(type_set),
        )
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "success_by_goal_type.png", dpi=120)
    plt.close(fig)

    metrics = ["success"] + [f"success/{t}" for t in types]
    data = {(eval_set, metric): curves(runs, eval_set, metric) for eval_set in sets for metric in metrics}
    with open(out / "curves.csv", "w", newline="") as f_curves, open(out / "summary.csv", "w", newline="") as f_sum:
        curve_rows, summary = csv.writer(f_curves), csv.writer(f_sum)
        curve_rows.writerow(["group", "set", "metric", "env_steps", "wall_seconds", "mean", "std", "seeds"])
        summary.writerow(
            [
                "group",
                "set",
                "metric",
                "final_env_steps",
                "final_wall_seconds",
                "mean",
                "std",
                "best_mean",
                "seeds",
                "seeds_in_group",
            ]
        )
        for eval_set in sets:
            for metric in metrics:
                for group, d in sorted(data[eval_set, metric].items()):
                    mean, std = np.nanmean(d["values"], 0), np.nanstd(d["values"], 0)
                    for i, step in enumerate(d["steps"]):
                        curve_rows.writerow(
                            [
                                group,
                                eval_set,
                                metric,
                                int(step),
                                round(float(d["seconds"][i]), 1),
                                round(float(mean[i]), 4),
                                round(float(std[i]), 4),
                                int(d["counts"][i]),
                            ]
                        )
                    summary.writerow(
                        [
                            group,
                            eval_set,
                            metric,
                            int(d["steps"][-1]),
                            round(float(d["seconds"][-1]), 1),
                            round(float(mean[-1]), 4),
                            round(float(std[-1]), 4),
                            round(float(mean.max()), 4),
                            int(d["counts"][-1]),
                            len(d["values"]),
                        ]
                    )
    with open(out / "levels.csv", "w", newline="") as f:  # the constant lines drawn, beside the curves
        rows = csv.writer(f)
        rows.writerow(["level", "set", "value"])
        rows.writerows([level.name, level.eval_set or "all", level.value] for level in levels)
    write_environments(runs, out)
    if reference is not None:
        write_relative(relative_rows(data, reference, target), out)
    if discovery:
        write_discovery(runs, out)
    return out


def write_environments(runs: list[dict], out: Path) -> None:
    """``environments.csv``: what each run ran on (its ``environment.json``; empty for runs
    written before it existed)."""
    with open(out / "environments.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["run", "group", "environment"])
        for run in runs:
            record = run["environment"]
            rows.writerow([run["run"], run["group"], environment_summary(record) if record else ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="run directories or folders holding them")
    parser.add_argument("--out", required=True, help="folder for the PNG and CSV files")
    parser.add_argument("--group-by", choices=["variant", "config"], default="variant")
    parser.add_argument(
        "--level",
        action="append",
        default=[],
        metavar="NAME[@SET]=VALUE",
        help="a constant success level drawn on the success panels (repeatable), "
        "e.g. random=0.32; @SET: only on that evaluation set's panels",
    )
    parser.add_argument(
        "--reference",
        metavar="GROUP",
        help="write relative.csv: every group's success relative to GROUP's at equal steps",
    )
    parser.add_argument(
        "--target", type=float, default=0.8, help="with --reference: the ratio a group should reach (default 0.8)"
    )
    parser.add_argument(
        "--discovery", action="store_true", help="write discovery.csv/png: autotelic runs' discovered goals over time"
    )
    args = parser.parse_args(argv)
    if not (math.isfinite(args.target) and args.target > 0):
        parser.error(f"--target {args.target}: the ratio to the reference's success to reach, a number > 0 (0.8: 80%)")
    try:
        levels = [Level.parse(text) for text in args.level]
    except ValueError as err:
        parser.error(str(err))
    out = aggregate(
        args.paths,
        args.out,
        args.group_by,
        levels=levels,
        reference=args.reference,
        target=args.target,
        discovery=args.discovery,
    )
    print(f"wrote {', '.join(sorted(p.name for p in out.iterdir()))} to {out}")
    with open(out / "environments.csv", newline="") as f:
        environments = len({row["environment"] for row in csv.DictReader(f) if row["environment"]})
    if environments > 1:  # bitwise reproducibility holds only within one
        print(
            f"the runs ran on {environments} different environments (environments.csv): compare their "
            "numbers statistically, not to the digit"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
