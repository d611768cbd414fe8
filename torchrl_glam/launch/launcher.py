"""Submit training runs to Slurm (or run them locally) with submitit.

    python -m torchrl_glam.launch --seeds 0-3 --preset cpu total_steps=50000
    python -m torchrl_glam.launch --sweep slurm/sweeps/critic_designs.yaml --slurm-config slurm/cluster.yaml
    python -m torchrl_glam.launch --seeds 0-1 --preset smoke --local --wait
    python -m torchrl_glam.launch --algorithm ppo_glam --seeds 0-3 --preset ppo_glam

All the runs of one command form one Slurm array job (one task per run: grid x seeds). Slurm
settings come from a YAML file (``--slurm-config``, see ``slurm/cluster.yaml``) and command-line
flags, which win. Each run writes under ``<runs-root>/<name>/<variant>/seed<k>``: its config
(``config.json``), logs, checkpoint, and ``launch.json`` (the command and the Slurm job).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import submitit
import yaml

from torchrl_glam.algorithms import algorithm_names, get_script
from torchrl_glam.launch.job import TrainingJob
from torchrl_glam.launch.sweeps import MAX_RUNS, RunSpec, load_sweep, parse_seeds
from torchrl_glam.training.cli import USAGE_ERROR, check_resumed_preset, check_run_dir, saved_config, unreadable_json
from torchrl_glam.training.config import config_from_preset, parse_overrides, preset_name
from torchrl_glam.training.rundir import RunDirError, existing_run_content, write_atomic


def validate_runs(runs: list[RunSpec], runs_root: str | Path) -> None:
    """Builds and validates every run's full config (algorithm, preset, overrides, seed) and checks
    that its run dir stays under ``runs_root``: a bad sweep fails here, at submission (and in
    ``--dry-run``), not inside queued jobs."""
    try:
        check_run_dir(str(runs_root), flag="--runs-root")  # a file, or below one: every job would fail
    except RunDirError as err:
        raise ValueError(str(err)) from None
    root = Path(runs_root).resolve()
    _refuse_shared_run_dirs(runs)
    for run in runs:
        where = f"run {run.run_dir}"
        if run.algorithm not in algorithm_names():
            raise ValueError(f"{where}: unknown algorithm {run.algorithm!r}; known: {algorithm_names()}")
        if not Path(run.run_dir).resolve().is_relative_to(root):
            raise ValueError(
                f"{where}: its directory leaves the runs root {root} (a sweep name or variant "
                "with '..' or an absolute path); use plain names"
            )
        script = get_script(run.algorithm)
        config_class = script.config_class
        overrides = dict(run.overrides)  # text values (YAML reads 1e-3 as text) are typed by the config
        for key in overrides:
            if config_class.has_field(key) and config_class.path_of(key) in ("run.seed", "run.run_dir"):
                raise ValueError(f"{where}: {key!r} is set by the launcher (--seeds / --runs-root), not in overrides")
        try:
            cfg = config_from_preset(
                config_class,
                script.presets,
                run.preset,
                {**overrides, "run.seed": run.seed, "run.run_dir": run.run_dir},
            )
            _check_resume(cfg, overrides, script, run.preset)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where} ({run.algorithm}, preset {run.preset!r}): {err}") from None


def _check_resume(cfg, overrides: dict[str, Any], script, preset: str) -> None:
    """Every job resumes its run dir (its command line carries --resume): where one already holds a
    run, refuse here what that resume would refuse on the cluster (a changed setting the checkpoint
    fixes, another preset's run, another algorithm's run, an unreadable config.json)."""
    run_dir = Path(cfg.run.run_dir)
    if not existing_run_content(run_dir):
        return
    saved = saved_config(type(cfg), run_dir)
    if saved is None:
        problem = "is unreadable" if unreadable_json(run_dir / "config.json") else "is missing or another algorithm's"
        raise ValueError(
            f"{run_dir} holds a run whose config.json {problem}, so its jobs cannot resume it: give these "
            "runs another --runs-root or --name, or remove that run dir"
        )
    check_resumed_preset(type(cfg), script.presets, preset, {**overrides, "run.seed": cfg.run.seed}, run_dir)
    from torchrl_glam.training.resume import resume_changes  # imports torch: only for existing runs

    resume_changes(saved.to_dict(), saved.replace({**overrides, "run.run_dir": str(run_dir)}).validate())


def _refuse_shared_run_dirs(runs: list[RunSpec]) -> None:
    """Two runs in one run dir would be refused at the second's start, on the cluster: refuse here."""
    seen: dict[str, RunSpec] = {}
    for run in runs:
        key = str(Path(run.run_dir).resolve())
        if key in seen:
            first = seen[key]
            raise ValueError(
                f"two runs write to {run.run_dir}: seed {first.seed} with {first.overrides} and seed "
                f"{run.seed} with {run.overrides} (a seed or grid value given twice, e.g. 0.0001 and "
                "'1e-4'): list each value once"
            )
        seen[key] = run


def max_array_size() -> int:
    """Slurm's MaxArraySize when ``scontrol`` answers, else :data:`MAX_RUNS` (Slurm's default)."""
    if not shutil.which("scontrol"):
        return MAX_RUNS
    try:
        shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return MAX_RUNS
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", shown, re.MULTILINE)
    return int(match.group(1)) if match else MAX_RUNS


SLURM_FIELDS = {  # YAML / flag name -> submitit parameter
    "partition": "slurm_partition",
    "account": "slurm_account",
    "qos": "slurm_qos",
    "time": "timeout_min",
    "gpus_per_node": "gpus_per_node",
    "cpus_per_task": "cpus_per_task",
    "mem_gb": "mem_gb",
    "nodes": "nodes",
    "tasks_per_node": "tasks_per_node",
    "array_parallelism": "slurm_array_parallelism",
    "signal_delay_s": "slurm_signal_delay_s",
}


def script_of(algorithm: str) -> Path:
    """The file of ``algorithm``'s training script (``torchrl_glam/algorithms/<algorithm>/train.py``)."""
    return get_script(algorithm).path


def slurm_parameters(config_file: str | None, flags: dict[str, Any], extra_sbatch: list[str]) -> dict[str, Any]:
    """submitit parameters from a YAML file and command-line flags (flags win)."""
    settings: dict[str, Any] = {}
    if config_file:
        with open(config_file) as f:
            settings = yaml.safe_load(f) or {}
    sbatch = dict(settings.pop("sbatch", None) or {})
    unknown = set(settings) - set(SLURM_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown Slurm settings {sorted(unknown)} in {config_file}; known: {sorted(SLURM_FIELDS)} and sbatch"
        )
    settings.update({k: v for k, v in flags.items() if v is not None})
    for pair in extra_sbatch:
        if "=" not in pair:
            raise ValueError(f"--sbatch {pair!r} is not KEY=VALUE (e.g. constraint=v100-32g)")
        key, value = pair.split("=", 1)
        sbatch[key] = value
    params = {SLURM_FIELDS[k]: v for k, v in settings.items() if v is not None}
    if sbatch:
        params["slurm_additional_parameters"] = sbatch
    return params


def make_executor(folder: str | Path, params: dict[str, Any], local: bool = False) -> submitit.Executor:
    """An executor on Slurm (``cluster="slurm"``) or on this machine (``local``)."""
    executor = submitit.AutoExecutor(folder=str(folder), cluster="local" if local else "slurm")
    if local:
        params = {k: v for k, v in params.items() if not k.startswith("slurm_") and k != "nodes"}
        params.setdefault("timeout_min", 60)
    executor.update_parameters(**params)
    return executor


def submit(runs: list[RunSpec], executor: submitit.Executor) -> list[submitit.Job]:
    """Submits every run as one array job; writes each run's ``launch.json``."""
    jobs_input = [TrainingJob(run.algorithm, run.argv()) for run in runs]
    with executor.batch():
        jobs = [executor.submit(job) for job in jobs_input]
    for run, job in zip(runs, jobs):
        Path(run.run_dir).mkdir(parents=True, exist_ok=True)
        write_atomic(
            Path(run.run_dir) / "launch.json",
            json.dumps(
                {
                    "job_id": job.job_id,
                    "algorithm": run.algorithm,
                    "preset": run.preset,
                    "seed": run.seed,
                    "overrides": run.overrides,
                    "argv": run.argv(),
                },
                indent=2,
                default=str,
            ),
        )
    return jobs


def build_runs(args) -> list[RunSpec]:
    max_runs = MAX_RUNS if args.local else max_array_size()
    seeds = parse_seeds(args.seeds, max_runs) if args.seeds is not None else None
    if args.sweep:
        runs = load_sweep(args.sweep, args.runs_root, seeds, max_runs)
    else:
        overrides = parse_overrides(args.overrides, get_script(args.algorithm).config_class)
        if "run.seed" in overrides:
            raise ValueError("seed=... in the overrides would give every run the same seed: use --seeds")
        name = args.name or preset_name(args.preset)
        runs = [
            RunSpec(
                name, args.algorithm, args.preset, overrides, seed, str(Path(args.runs_root) / name / f"seed{seed}")
            )
            for seed in seeds or [0]
        ]
    validate_runs(runs, args.runs_root)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--algorithm",
        default="sac_glam",
        choices=algorithm_names(),
        help="the training script (torchrl_glam/algorithms/<algorithm>/train.py, or a package's entry point)",
    )
    parser.add_argument("--preset", default="cpu", help="a preset of the algorithm or a YAML file like theirs")
    parser.add_argument("--seeds", default=None, help="e.g. 0-3 or 0,2,5 (default: the sweep's, or 0)")
    parser.add_argument("--sweep", default=None, help="a sweep file (slurm/sweeps/*.yaml)")
    parser.add_argument("--name", default=None, help="folder of the runs (default: the preset)")
    parser.add_argument("--runs-root", default="runs")
    parser.add_argument("--slurm-config", default=None, help="YAML of Slurm settings (slurm/cluster.yaml)")
    parser.add_argument("--local", action="store_true", help="run with submitit's local executor")
    parser.add_argument("--dry-run", action="store_true", help="print the runs, submit nothing")
    parser.add_argument("--wait", action="store_true", help="wait for the jobs and report")
    for flag, kind in [
        ("partition", str),
        ("account", str),
        ("qos", str),
        ("time", int),
        ("gpus_per_node", int),
        ("cpus_per_task", int),
        ("mem_gb", float),
        ("nodes", int),
        ("tasks_per_node", int),
        ("array_parallelism", int),
    ]:
        parser.add_argument(f"--{flag.replace('_', '-')}", dest=flag, type=kind, default=None)
    parser.add_argument("--sbatch", action="append", default=[], help="extra sbatch option KEY=VALUE")
    parser.add_argument("overrides", nargs="*", help="config field=value for every run")
    args = parser.parse_intermixed_args(argv)
    runs = build_runs(args)
    if args.dry_run:
        for run in runs:
            print(run.run_dir, "::", run.algorithm, " ".join(run.argv()))
        print(f"{len(runs)} runs")
        return 0
    flags = {k: getattr(args, k) for k in SLURM_FIELDS if hasattr(args, k)}
    params = slurm_parameters(args.slurm_config, flags, args.sbatch)
    executor = make_executor(Path(args.runs_root) / "submitit" / "%j", params, local=args.local)
    if args.local and args.array_parallelism:
        return _run_locally_in_waves(runs, executor, args.array_parallelism)
    jobs = submit(runs, executor)
    print(f"submitted {len(jobs)} runs: job {jobs[0].job_id.split('_')[0]}")
    if args.wait:
        return _report(runs, jobs)
    return 0


def cli(argv: list[str] | None = None) -> int:
    """The launcher's command line: a refusal (a bad seed list, field, value or sweep, a resume its
    jobs would refuse) is printed as ``error: <message>`` with exit code 2, before anything is
    submitted; :func:`main` raises it (callers in Python)."""
    try:
        return main(argv)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR


def _report(runs: list[RunSpec], jobs: list[submitit.Job]) -> int:
    """Waits for ``jobs``, prints each run's outcome; 1 when one failed."""
    failed = 0
    for run, job in zip(runs, jobs):
        try:
            job.result()
            print(f"done   {run.run_dir}")
        except Exception as err:  # noqa: BLE001 - report every failure, then exit non-zero
            failed += 1
            print(f"FAILED {run.run_dir}: {err}", file=sys.stderr)
    return int(failed > 0)


def _run_locally_in_waves(runs: list[RunSpec], executor: submitit.Executor, parallelism: int) -> int:
    """submitit's local executor starts every job at once: --array-parallelism N runs them N at a
    time here, the launcher waiting for each wave (as Slurm's %N throttle would)."""
    failed = 0
    for start in range(0, len(runs), parallelism):
        wave = runs[start : start + parallelism]
        print(f"running runs {start + 1}-{start + len(wave)} of {len(runs)} ({parallelism} at a time)")
        failed += _report(wave, submit(wave, executor))
    return int(failed > 0)
