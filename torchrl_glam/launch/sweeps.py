"""Runs to launch: one configuration over seeds, or a sweep file's grid x seeds.

A sweep file (YAML, under ``slurm/sweeps/``)::

    name: critic_designs            # the folder of the sweep's runs
    algorithm: sac_glam             # a training script: torchrl_glam/training/scripts/<algorithm>.py
    preset: cpu
    overrides: {total_steps: 50000} # for every run
    grid:                           # every combination...
      critic_input: [observation_action, observation]
      critic_backprop: [true, false]
    variants:                       # ... and/or named variants (each may set algorithm/preset)
      sac_glam_her: {preset: sac_glam_her}
    seeds: [0, 1, 2, 3]

Each run gets ``<runs_root>/<name>/<variant>/seed<k>`` as its run directory; the variant's name
lists its grid values (``critic_input-observation__critic_backprop-false``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SWEEP_KEYS = {"name", "algorithm", "preset", "overrides", "grid", "variants", "seeds"}


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
        return ["--preset", self.preset, "--run-dir", self.run_dir, "--resume", "--no-progress",
                f"seed={self.seed}", *pairs]


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def parse_seeds(text: str | int | list) -> list[int]:
    """"0-3" -> [0, 1, 2, 3]; "0,2,5" -> [0, 2, 5]; 4 -> [4]."""
    if isinstance(text, int):
        return [text]
    if isinstance(text, list):
        return [int(s) for s in text]
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-", 1)
            if int(high) < int(low):
                raise ValueError(f"bad seed range {part!r}: write low-high, e.g. 0-3")
            seeds.extend(range(int(low), int(high) + 1))
        elif part:
            seeds.append(int(part))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}: write e.g. 0-3 or 0,1,5")
    return seeds


def _variant_name(values: dict[str, Any]) -> str:
    return "__".join(f"{k}-{_text(v)}" for k, v in values.items()) or "default"


def expand_sweep(sweep: dict[str, Any], runs_root: str | Path, seeds: list[int] | None = None) -> list[RunSpec]:
    """The runs of a sweep (a parsed sweep file): variants x grid x seeds."""
    unknown = set(sweep) - SWEEP_KEYS
    if unknown:
        raise ValueError(f"unknown sweep keys {sorted(unknown)}; a sweep has {sorted(SWEEP_KEYS)}")
    name = sweep.get("name") or "sweep"
    base = {"algorithm": sweep.get("algorithm", "sac_glam"), "preset": sweep.get("preset", "cpu")}
    common = dict(sweep.get("overrides") or {})
    grid = sweep.get("grid") or {}
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"sweep grid entry {key!r} must be a non-empty list of values")
    variants = sweep.get("variants") or {"": {}}
    for where, keys in [("overrides", common), ("grid", grid),
                        *((f"variant {v!r}", settings or {}) for v, settings in variants.items())]:
        for key in ("seed", "run_dir"):
            if key in keys:
                raise ValueError(
                    f"sweep {name!r} sets {key!r} in its {where}: the launcher sets it per run "
                    + ("from the sweep's `seeds:` list or --seeds (one value here would give every seed the "
                       "same run)" if key == "seed" else "under --runs-root") + "; remove it")
    seeds = seeds if seeds is not None else parse_seeds(sweep.get("seeds", [0]))
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


def load_sweep(path: str | Path, runs_root: str | Path, seeds: list[int] | None = None) -> list[RunSpec]:
    with open(path) as f:
        sweep = yaml.safe_load(f)
    if not isinstance(sweep, dict):
        raise ValueError(f"sweep file {path} must hold a mapping (name, grid, seeds, ...)")
    sweep.setdefault("name", Path(path).stem)
    return expand_sweep(sweep, runs_root, seeds)
