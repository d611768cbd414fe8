"""Nothing silent, nothing outside the run dir, every refusal one line (issue 83): a resume never
continues another preset's run, a tampered record is never followed, a damaged environment.json or
a full disk is said in one line, a run dir that cannot be one is refused before torch loads."""

import errno
import json
import logging
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from test_light_command_line import HEAVY, PROBE, probe  # noqa: E402

from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig  # noqa: E402
from torchrl_glam.launch.launcher import cli as launch  # noqa: E402
from torchrl_glam.storage import StorageError  # noqa: E402
from torchrl_glam.training import checkpoint as ckpt  # noqa: E402
from torchrl_glam.training import cli, rundir  # noqa: E402
from torchrl_glam.training.config import ConfigError  # noqa: E402
from torchrl_glam.training.provenance import record_environment  # noqa: E402

SHORT = ["--no-progress", "total_steps=16", "eval_every=16"]


def _one_line(capsys, says: str) -> None:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    assert says in err, err


def _smoke_run(sac_example, run: Path, *extra: str) -> None:
    assert sac_example.main(["--preset", "smoke", "--run-dir", str(run), *SHORT, *extra]) == 0
    rundir.release_run_dir(run)  # as if its process had ended


# ---- the launcher and --resume never continue another preset's run


@pytest.mark.parametrize("record", ["marker", "launch.json"])
def test_another_presets_run_is_refused_by_the_dry_run_and_by_the_job(tmp_path, capsys, sac_example, record):
    run = tmp_path / "smoke" / "seed0"
    _smoke_run(sac_example, run)
    if record == "launch.json":  # a run of an earlier version: its marker names no preset, the launcher's record does
        (run / rundir.MARKER_NAME).write_text('{"created_by": "torchrl_glam"}\n')
        (run / "launch.json").write_text(json.dumps({"preset": "smoke", "seed": 0}))
    root = ["--runs-root", str(tmp_path), "--name", "smoke", "--seeds", "0"]
    assert launch(["--dry-run", "--preset", "smoke_textworld", *root, "total_steps=32"]) == 2
    _one_line(capsys, "holds a run started with --preset smoke, and --preset smoke_textworld sets other values")
    assert launch(["--local", "--preset", "smoke_textworld", *root, "total_steps=32"]) == 2  # nothing submitted
    capsys.readouterr()
    # the job's own command line (what a job submitted before this check would run) refuses it too
    job = ["--preset", "smoke_textworld", "--run-dir", str(run), "--resume", "--no-progress", "seed=0"]
    with pytest.raises(ConfigError, match=r"env.name: smoke 'playground', smoke_textworld 'textworld_coin_collector'"):
        sac_example.main([*job, "total_steps=32"])
    assert json.loads((run / "config.json").read_text())["run"]["total_steps"] == 16  # untouched
    # the same preset, longer: what a resume may change passes
    assert launch(["--dry-run", "--preset", "smoke", *root, "total_steps=32"]) == 0


def test_a_resume_without_preset_continues_with_the_runs_own_preset(tmp_path, sac_example):
    run = tmp_path / "run"
    _smoke_run(sac_example, run, "batch_size=8")
    cfg, options = cli.parse_command_line(SACGLAMConfig, PRESETS, ["--run-dir", str(run), "--resume"])
    assert options.preset == "smoke" and cfg.algorithm.batch_size == 8  # its stop line names --preset smoke
    # its own preset with the overrides it started with is not "another preset"
    cfg, _ = cli.parse_command_line(
        SACGLAMConfig, PRESETS, ["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"]
    )
    assert cfg.run.total_steps == 32 and cfg.algorithm.batch_size == 8
    # a fresh start in the folder (--overwrite) records its own preset
    assert sac_example.main(["--preset", "smoke_babyai", "--run-dir", str(run), "--overwrite", *SHORT]) == 0
    assert rundir.started_preset(run) == "smoke_babyai"


# ---- the run's record: entries outside the run dir are ignored, never followed


def test_a_record_naming_paths_outside_the_run_dir_is_ignored_with_one_warning(tmp_path, sac_example, caplog):
    run, outside = tmp_path / "run", tmp_path / "outside"
    (outside / "empty").mkdir(parents=True)
    (outside / "keep.txt").write_text("mine")
    _smoke_run(sac_example, run)
    with open(run / rundir.WRITTEN_NAME, "a") as record:
        record.write(f"{outside / 'keep.txt'}\n{outside / 'empty'}/\n{outside}/**\n")
    with caplog.at_level(logging.WARNING, logger="torchrl_glam.training.rundir"):
        assert sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"]) == 0
        rundir.release_run_dir(run)
        assert sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--overwrite", *SHORT]) == 0
    warned = [r.getMessage() for r in caplog.records if "outside its run dir" in r.getMessage()]
    assert warned and "ignored, never followed nor removed" in warned[0]
    assert (outside / "keep.txt").read_text() == "mine" and (outside / "empty").is_dir()


# ---- environment.json: a damaged record is compared, then replaced; a folder there is one line


@pytest.mark.parametrize(
    "damaged",
    [
        {"packages": ["torch"], "torch": "2.13", "cpu": 7, "git": "abc"},  # every field of another type
        [1, 2, 3],  # not an object
        "not json",
    ],
)
def test_a_damaged_environment_record_is_said_on_resume_and_replaced(tmp_path, damaged):
    path = tmp_path / "environment.json"
    path.write_text(damaged if isinstance(damaged, str) else json.dumps(damaged))
    warning = record_environment(tmp_path, resumed=True)
    assert warning is not None and warning.startswith("warning: this resume runs elsewhere")
    assert isinstance(json.loads(path.read_text())["packages"], dict)  # the current record replaced it
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "environment_changed"


def test_a_folder_in_place_of_the_environment_record_is_refused_in_one_line(tmp_path, sac_example, capsys):
    run = tmp_path / "run"
    _smoke_run(sac_example, run)
    (run / "environment.json").unlink()
    (run / "environment.json").mkdir()
    code = sac_example.cli(["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"])
    assert code == 2
    _one_line(capsys, "environment.json is a folder")


# ---- a full disk names the file and keeps the last checkpoint


def _torch_save_on_a_full_disk(obj, f):
    """What torch.save does when the disk fills: its zip writer raises a RuntimeError that names no
    cause; the file's OSError is only its context."""
    try:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598") from None


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, sac_example, capsys):
    run = tmp_path / "run"
    _smoke_run(sac_example, run)
    before = ckpt.load_checkpoint(run)["wall_seconds"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "save", _torch_save_on_a_full_disk)
        code = sac_example.cli(["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"])
    assert code == 2
    _one_line(capsys, f"No space left on device while writing {run / 'checkpoint.pt'}")
    rundir.release_run_dir(run)
    assert ckpt.load_checkpoint(run)["wall_seconds"] == before


def test_a_full_disk_while_logging_names_the_logs_folder(tmp_path, sac_example, capsys):
    from torchrl.record.loggers import CSVLogger

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CSVLogger, "log_scalar", full)
        code = sac_example.cli(["--preset", "smoke", "--run-dir", str(tmp_path / "run"), *SHORT])
    assert code == 2
    _one_line(capsys, f"disk full at {tmp_path / 'run' / 'logs'}")


def test_a_storage_error_keeps_the_systems_errno():
    error = StorageError("disk full at /x", errno.ENOSPC)
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC and str(error) == "disk full at /x"


# ---- run dirs that cannot be one: refused in one line before torch loads


def _refused_before_torch(argv, says):
    done, (code, imported) = probe(PROBE.format(script="sac_glam", argv=argv, heavy=HEAVY))
    assert code == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert "torch" not in imported, imported


def test_a_run_dir_below_a_file_is_refused_before_torch(tmp_path):
    (tmp_path / "afile").write_text("mine")
    _refused_before_torch(["--run-dir", str(tmp_path / "afile" / "run")], "which is a file")
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_run_dir_that_cannot_be_written_is_refused_before_anything(tmp_path, monkeypatch):
    folder = tmp_path / "readonly"
    folder.mkdir()
    real_access = os.access
    # as root (CI), no permission bit stops a write: the folder is made unwritable to os.access alone
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder and real_access(path, mode))
    argv = ["--preset", "smoke", "--run-dir", str(folder / "run")]
    with pytest.raises(rundir.RunDirError, match=r"readonly is not writable by this user"):
        cli.parse_command_line(SACGLAMConfig, PRESETS, argv)
    assert list(folder.iterdir()) == []


def test_the_launchers_runs_root_naming_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    for root in (tmp_path / "afile", tmp_path / "afile" / "below"):
        assert launch(["--dry-run", "--preset", "smoke", "--runs-root", str(root)]) == 2
        _one_line(capsys, "--runs-root")


# ---- presets: a YAML bomb is refused at once; --help is built for --help only


def test_a_yaml_alias_bomb_preset_is_refused_in_one_line(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 7)]  # 9**7 values
    preset = tmp_path / "bomb.yaml"
    preset.write_text("extends: smoke\nbomb:\n" + "".join(f"  {line}\n" for line in levels))
    _refused_before_torch(["--preset", str(preset), "--run-dir", str(tmp_path / "r")], "expands to more than")


def test_the_help_text_is_built_only_for_help(tmp_path, monkeypatch):
    def refuse(*args):
        raise AssertionError("the --help text was built for a run")

    monkeypatch.setattr(cli, "_fields_epilog", refuse)
    cfg, _ = cli.parse_command_line(SACGLAMConfig, PRESETS, ["--preset", "smoke", "--run-dir", str(tmp_path / "r")])
    assert cfg.run.run_dir == str(tmp_path / "r")
