"""Issue 69, item 2: every file a run writes goes through one writer, which records it and never
writes through a link; --overwrite deletes exactly what the record lists, and refuses, deleting
nothing, a folder that also holds anything else. The paths are listed from a real run, not by hand."""

import json
import os
import shutil

import pytest

from torchrl_glam.training import rundir

SMOKE = ["--preset", "smoke", "--no-progress", "total_steps=32", "eval_every=16", "checkpoint_every=16"]
KEPT = {rundir.LOCK_NAME, rundir.MARKER_NAME}  # the lock and the marker outlive --overwrite


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, sac_example):
    run = tmp_path_factory.mktemp("real") / "run"
    assert sac_example.main([*SMOKE, "--run-dir", str(run)]) == 0
    assert sac_example.main([*SMOKE, "--run-dir", str(run), "--resume", "total_steps=48"]) == 0
    rundir.release_run_dir(run)
    return run


def _everything_in(run):
    return sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))


def test_every_file_a_run_writes_is_in_its_record_under_a_name_a_run_writes(real_run):
    written = rundir.written_entries(real_run)
    files = [p for p in _everything_in(real_run) if (real_run / p).is_file()]
    assert len(files) > 15
    for relative in files:
        assert relative in KEPT | {rundir.WRITTEN_NAME} or rundir._own(relative, written), relative
    for name in {p.split("/")[0] for p in files}:
        assert rundir.is_artifact(name), name  # a fresh run refuses a link planted there


def _copy_with_a_link_at(run, relative, tmp_path):
    """A copy of ``run`` whose ``relative`` is a link to the same content outside it; returns the
    copy and the outside folder."""
    copy, outside = tmp_path / "copy", tmp_path / "outside"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)
    shutil.copytree(run, copy, symlinks=True)
    outside.mkdir()
    target = outside / "target"
    os.rename(copy / relative, target)
    (copy / relative).symlink_to(target)
    return copy, outside


def _contents(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_link_planted_at_any_path_a_real_run_wrote_is_refused_on_resume(real_run, tmp_path, sac_example):
    for relative in _everything_in(real_run):
        copy, outside = _copy_with_a_link_at(real_run, relative, tmp_path)
        before = _contents(outside)
        with pytest.raises(RuntimeError, match=r"is a symbolic link.*Remove the link"):
            sac_example.main([*SMOKE, "--run-dir", str(copy), "--resume", "total_steps=64"])
        assert _contents(outside) == before, relative
        rundir.release_run_dir(copy)


def test_a_link_planted_at_any_name_a_run_writes_is_refused_on_a_fresh_run(real_run, tmp_path, sac_example):
    for name in sorted({p.split("/")[0] for p in _everything_in(real_run)}):
        fresh, outside = tmp_path / name.strip(".") / "run", tmp_path / name.strip(".") / "outside"
        fresh.mkdir(parents=True)
        outside.mkdir()
        (outside / "victim").write_text("the user's file\n")
        (fresh / name).symlink_to(outside / "victim")
        with pytest.raises(RuntimeError, match=r"symbolic link|already holds a run"):
            sac_example.main([*SMOKE, "--run-dir", str(fresh)])
        assert (outside / "victim").read_text() == "the user's file\n", name
        rundir.release_run_dir(fresh)


def test_the_report_is_not_written_through_a_link(tmp_path, sac_example):
    # the report: a link planted at report.md before a fresh run
    run, victim = tmp_path / "run", tmp_path / "victim.md"
    run.mkdir()
    victim.write_text("mine\n")
    (run / "report.md").symlink_to(victim)
    with pytest.raises(RuntimeError, match=r"report.md is a symbolic link"):
        sac_example.main([*SMOKE, "--run-dir", str(run)])
    assert victim.read_text() == "mine\n"


def test_the_writer_refuses_a_link_at_the_file_or_a_folder_on_its_way(tmp_path):
    (tmp_path / rundir.MARKER_NAME).write_text("{}")
    victim_dir = tmp_path.parent / f"{tmp_path.name}-victims"
    victim_dir.mkdir()
    (victim_dir / "report.md").write_text("keep\n")
    (tmp_path / "report.md").symlink_to(victim_dir / "report.md")
    with pytest.raises(rundir.RunDirError, match="report.md is a symbolic link"):
        rundir.write_atomic(tmp_path / "report.md", "x")
    (tmp_path / "logs").symlink_to(victim_dir)
    with pytest.raises(rundir.RunDirError, match="logs is a symbolic link"):
        rundir.append_line(tmp_path / "logs" / "report.md", "x\n")
    assert (victim_dir / "report.md").read_text() == "keep\n"


def test_overwrite_deletes_exactly_what_the_run_wrote(real_run, tmp_path, sac_example):
    run = tmp_path / "run"
    shutil.copytree(real_run, run, symlinks=True)
    (run / "analysis.ipynb").write_text("{}")
    (run / "figures").mkdir()
    (run / "figures" / "curve.png").write_bytes(b"png")
    (run / "logs" / "notes.txt").write_text("mine")
    before = _everything_in(run)
    with pytest.raises(RuntimeError, match=r"analysis.ipynb, figures/curve.png, logs/notes.txt, which no run wrote"):
        sac_example.main([*SMOKE, "--run-dir", str(run), "--overwrite"])
    assert _everything_in(run) == before  # nothing deleted
    rundir.release_run_dir(run)
    for user_file in ("analysis.ipynb", "figures", "logs/notes.txt"):
        shutil.rmtree(run / user_file) if (run / user_file).is_dir() else (run / user_file).unlink()
    (run / "figures").mkdir()  # an empty folder of the user's is neither deleted nor refused
    assert sac_example.main([*SMOKE, "--run-dir", str(run), "--overwrite"]) == 0
    event = json.loads((run / "events.jsonl").read_text().splitlines()[0])
    assert event["event"] == "overwrite" and "figures" not in event["removed"]
    assert "logs/scalars/eval/train/success.csv" in event["removed"] and "checkpoint.pt" in event["removed"]
    assert (run / "figures").is_dir()
    rundir.release_run_dir(run)


def test_overwrite_of_a_folder_no_run_recorded_deletes_nothing(tmp_path, sac_example):
    # a folder no run used, holding logs/ and config.json of the user's own
    project = tmp_path / "proj"
    (project / "logs").mkdir(parents=True)
    (project / "logs" / "mine.csv").write_text("1,2\n")
    (project / "config.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"config.json, logs/mine.csv, which no run wrote.*Nothing was deleted"):
        sac_example.main([*SMOKE, "--run-dir", str(project), "--overwrite"])
    assert sorted(p.name for p in project.iterdir()) == ["config.json", "logs"]
    assert (project / "logs" / "mine.csv").read_text() == "1,2\n"
