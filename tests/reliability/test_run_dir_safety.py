"""Issue 43, items 1, 2 and 7's config.json: --overwrite deletes only what runs wrote, an empty
run_dir is refused, nothing is written through a symbolic link, config.json is written atomically."""

import json
import os

import pytest

from torchrl_glam.training import rundir

SMOKE = ["--preset", "smoke", "--no-progress", "total_steps=16", "eval_every=16", "checkpoint_every=16"]


def test_overwrite_refuses_a_folder_holding_what_no_run_wrote(tmp_path, sac_example):
    project = tmp_path / "proj"
    for folder in ("src", "logs", ".git"):
        (project / folder).mkdir(parents=True)
    (project / "src" / "train.py").write_text("code")
    with pytest.raises(RuntimeError, match=r"src.*no run wrote.*Nothing was deleted"):
        sac_example.main([*SMOKE, "--run-dir", str(project), "--overwrite"])
    assert (project / "src" / "train.py").read_text() == "code" and (project / ".git").is_dir()
    assert sorted(p.name for p in project.iterdir()) == [".git", "logs", "src"]  # nothing created either


def test_overwrite_of_an_older_run_dir_removes_only_run_files_and_records_them(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "launch.json").write_text("{}")
    rundir.prepare_run_dir(run, resume=False, overwrite=True)
    try:
        assert sorted(p.name for p in run.iterdir()) == [".lock", rundir.MARKER_NAME, "events.jsonl", "launch.json"]
        event = json.loads((run / "events.jsonl").read_text())
        assert event["removed"] == ["config.json", "logs"]
    finally:
        rundir.release_run_dir(run)


@pytest.mark.parametrize("run_dir", ["", "  "])
def test_an_empty_run_dir_is_refused(tmp_path, sac_example, run_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="run_dir.*--run-dir"):
        sac_example.main([*SMOKE, f"run_dir={run_dir}"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", [".lock", "config.json", "events.jsonl", "logs"])
def test_a_planted_link_is_refused_and_its_target_untouched(tmp_path, sac_example, name):
    run, outside = tmp_path / "run", tmp_path / "outside"
    assert sac_example.main([*SMOKE, "--run-dir", str(run)]) == 0
    rundir.release_run_dir(run)  # the lock of this process: the next main takes it again
    target = outside / name
    outside.mkdir()
    if (run / name).is_dir():
        os.rename(run / name, target)
    else:
        target.write_text("the user's file\n")
        (run / name).unlink(missing_ok=True)  # a fresh run writes no events.jsonl yet
    (run / name).symlink_to(target)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    with pytest.raises(RuntimeError, match=rf"{name} is a symbolic link.*Remove the link"):
        sac_example.main([*SMOKE, "--run-dir", str(run), "--resume", "total_steps=32"])
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before


def test_appends_and_atomic_writes_never_follow_a_link(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    (tmp_path / "events.jsonl").symlink_to(target)
    with pytest.raises(rundir.RunDirError, match="symbolic link"):
        rundir.record_event(tmp_path, "resume")
    (tmp_path / "config.json").symlink_to(target)
    rundir.write_atomic(tmp_path / "config.json", "{}")
    assert target.read_text() == "keep\n" and not (tmp_path / "config.json").is_symlink()
