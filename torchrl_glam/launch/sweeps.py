"""Runs to launch: one configuration over seeds, or a sweep file's grid x seeds.

A sweep file (YAML, under ``slurm/sweeps/``)::

    name: critic_designs            # the folder of the sweep's runs
    algorithm: sac_glam             # a training script: torchrl_glam/algorithms/<algorithm>/train.py
    preset: cpu
    overrides: {total_steps: 50000} # for every run
    grid:                           # every combination...
      critic_input: [observation_action, observation]
      critic_backprop: [true, false]
    variants:                       # ... and/or named variants (each may set algorithm/preset)
      sac_glam_her: {preset: sac_glam_her}
    seeds: [0, 1, 2, 3]

A preset is an algorithm's by name or a preset file by its path from the sweep file's folder (a
study's, ``experiments/<study>/presets/<algorithm>/<name>.yaml``).

Each run gets ``<runs_root>/<name>/<variant>/seed<k>`` as its run directory; the variant's name
lists its grid values (``critic_input-observation__critic_backprop-false``).

Sizes are checked before anything grows: a sweep file is at most :data:`MAX_SWEEP_BYTES` and
:data:`MAX_SWEEP_NODES` values once its YAML aliases are expanded, and a sweep or seed range at
most ``max_runs`` runs (:data:`MAX_RUNS`, Slurm's default ``MaxArraySize`` of 1001 tasks, unless the
cluster says otherwise: ``launcher.max_array_size``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from torchrl_glam.training.config import flatten_sections
from torchrl_glam.training.config.presets import count_values

SWEEP_KEYS = {"name", "algorithm", "preset", "overrides", "grid", "variants", "seeds"}
MAX_RUNS = 1001  # Slurm's default MaxArraySize: one array job holds at most this many tasks
MAX_SWEEP_BYTES = 1 << 20
MAX_SWEEP_NODES = 100_000  # values in the parsed file, aliases counted each time they are used


@dataclass(frozen=True)
class RunSpec:
    """One training run: which script, preset and overrides, and where it writes."""

    name: str  # the variant
    algorithm: str
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict, hash=False)
    seed: int = 0
    run_dir: str = ""

    def argv(self) -> list[str]:
        """The script's command line (``--resume`` always: a requeued task continues)."""
        pairs = [f"{k}={_text(v)}" for k, v in sorted(self.overrides.items())]
        return [
            "--preset",
            self.preset,
            "--run-dir",
            self.run_dir,
            "--resume",
            "--no-progress",
            f"seed={self.seed}",
            *pairs,
        ]


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def parse_seeds(text: str | int | list, max_runs: int = MAX_RUNS) -> list[int]:
    """ "0-3" -> [0, 1, 2, 3]; "0,2,5" -> [0, 2, 5]; 4 -> [4]. A seed given twice ("0,00") or more
    than ``max_runs`` seeds are refused."""
    if isinstance(text, list):
        parts = text
    elif isinstance(text, int) and not isinstance(text, bool):
        parts = [text]
    else:
        parts = [part.strip() for part in str(text).split(",") if part.strip()]
    seeds: list[int] = []
    for part in parts:
        low, high = _seed_range(part, text)
        if len(seeds) + high - low + 1 > max_runs:
            raise ValueError(
                f"seeds {text!r} give more than {max_runs} runs (one Slurm array job's "
                "limit): split them over several launches"
            )
        seeds.extend(range(low, high + 1))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}: write e.g. 0-3 or 0,1,5")
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ValueError(
            f"seeds {text!r} give seed(s) {repeated} more than once (two runs in one run dir): list each seed once"
        )
    return seeds


def _seed_range(part: Any, text: Any) -> tuple[int, int]:
    """One item of a seed list: an integer, "k" or "low-high" -> (low, high)."""
    if isinstance(part, int) and not isinstance(part, bool):
        return part, part
    if not isinstance(part, str):
        raise ValueError(f"bad seed {part!r} in {text!r}: seeds are integers, e.g. 0-3 or 0,1,5")
    low, dash, high = part.partition("-") if not part.startswith("-") else (part, "", "")
    try:
        low, high = int(low), int(high) if dash else int(low)
    except ValueError:
        raise ValueError(f"bad seed {part!r} in {text!r}: seeds are integers, e.g. 0-3 or 0,1,5") from None
    if high < low:
        raise ValueError(f"bad seed range {part!r}: write low-high, e.g. 0-3")
    return low, high


def _variant_name(values: dict[str, Any]) -> str:
    return "__".join(f"{k}-{_text(v)}" for k, v in values.items()) or "default"


def expand_sweep(
    sweep: dict[str, Any], runs_root: str | Path, seeds: list[int] | None = None, max_runs: int = MAX_RUNS
) -> list[RunSpec]:
    """The runs of a sweep (a parsed sweep file): variants x grid x seeds, refused beyond
    ``max_runs`` before any is built."""
    unknown = set(sweep) - SWEEP_KEYS
    if unknown:
        raise ValueError(f"unknown sweep keys {sorted(unknown)}; a sweep has {sorted(SWEEP_KEYS)}")
    name = sweep.get("name") or "sweep"
    base = {"algorithm": sweep.get("algorithm", "sac_glam"), "preset": sweep.get("preset", "cpu")}
    common = flatten_sections(sweep.get("overrides") or {})  # sections as paths: replay: {her: true}
    grid = sweep.get("grid") or {}
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"sweep grid entry {key!r} must be a non-empty list of values")
    variants = {
        variant: flatten_sections(settings or {}) for variant, settings in (sweep.get("variants") or {"": {}}).items()
    }
    for where, keys in [
        ("overrides", common),
        ("grid", grid),
        *((f"variant {v!r}", settings or {}) for v, settings in variants.items()),
    ]:
        for key in ("seed", "run_dir"):
            if key in keys or f"run.{key}" in keys:
                raise ValueError(
                    f"sweep {name!r} sets {key!r} in its {where}: the launcher sets it per run "
                    + (
                        "from the sweep's `seeds:` list or --seeds (one value here would give every seed the same run)"
                        if key == "seed"
                        else "under --runs-root"
                    )
                    + "; remove it"
                )
    seeds = seeds if seeds is not None else parse_seeds(sweep.get("seeds", [0]), max_runs)
    count = len(variants) * math.prod(len(values) for values in grid.values()) * len(seeds)
    if count > max_runs:
        raise ValueError(
            f"sweep {name!r} has {count} runs (variants x grid x seeds), more than {max_runs} "
            "(one Slurm array job's limit): make the grid smaller or split the sweep"
        )
    runs = []
    for variant, settings in variants.items():
        settings = dict(settings or {})
        algorithm = settings.pop("algorithm", base["algorithm"])
        preset = settings.pop("preset", base["preset"])
        for combo in itertools.product(*grid.values()) if grid else [()]:
            values = dict(zip(grid.keys(), combo))
            label = "__".join(part for part in (variant, _variant_name(values) if grid else "") if part) or "default"
            overrides = {**common, **settings, **values}
            for seed in seeds:
                run_dir = str(Path(runs_root) / name / label / f"seed{seed}")
                runs.append(RunSpec(label, algorithm, preset, overrides, seed, run_dir))
    return runs


def load_sweep(
    path: str | Path, runs_root: str | Path, seeds: list[int] | None = None, max_runs: int = MAX_RUNS
) -> list[RunSpec]:
    if Path(path).stat().st_size > MAX_SWEEP_BYTES:
        raise ValueError(f"sweep file {path} is over {MAX_SWEEP_BYTES} bytes: a sweep is a short YAML file")
    with open(path) as f:
        sweep = yaml.safe_load(f)
    if not isinstance(sweep, dict):
        raise ValueError(f"sweep file {path} must hold a mapping (name, grid, seeds, ...)")
    if count_values(sweep, MAX_SWEEP_NODES) > MAX_SWEEP_NODES:
        raise ValueError(
            f"sweep file {path} expands to more than {MAX_SWEEP_NODES} values (YAML aliases "
            "count each time they are used): write the values out, without nested aliases"
        )
    sweep.setdefault("name", Path(path).stem)
    return expand_sweep(_preset_files_found(sweep, Path(path).parent), runs_root, seeds, max_runs)


def _preset_files_found(sweep: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``sweep`` with each preset file it names (``preset: ../../experiments/<study>/presets/...yaml``)
    as an absolute path: read from the sweep file's folder, as ``extends:`` in a preset file is,
    so that the sweep means the same from any working directory and in its jobs."""

    def found(preset: Any) -> Any:
        if isinstance(preset, str) and preset.endswith((".yaml", ".yml")):
            return str((folder / preset).resolve())
        return preset

    sweep = dict(sweep)
    if "preset" in sweep:
        sweep["preset"] = found(sweep["preset"])
    if isinstance(sweep.get("variants"), dict):
        sweep["variants"] = {
            name: {**settings, "preset": found(settings["preset"])}
            if isinstance(settings, dict) and "preset" in settings
            else settings
            for name, settings in sweep["variants"].items()
        }
    return sweep
