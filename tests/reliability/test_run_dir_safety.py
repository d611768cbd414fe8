"""Issue 43, items 1, 2 and 7's config.json: --overwrite refuses a folder of the user's, an empty
run_dir is refused, nothing is written through a symbolic link (more: test_run_files.py)."""

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


@pytest.mark.parametrize("run_dir", ["", "  "])
def test_an_empty_run_dir_is_refused(tmp_path, sac_example, run_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="run_dir.*--run-dir"):
        sac_example.main([*SMOKE, f"run_dir={run_dir}"])
    assert list(tmp_path.iterdir()) == []


def test_appends_and_atomic_writes_never_follow_a_link(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    (tmp_path / "events.jsonl").symlink_to(target)
    with pytest.raises(rundir.RunDirError, match="symbolic link"):
        rundir.record_event(tmp_path, "resume")
    (tmp_path / "config.json").symlink_to(target)
    with pytest.raises(rundir.RunDirError, match="symbolic link"):
        rundir.write_atomic(tmp_path / "config.json", "{}")
    assert target.read_text() == "keep\n"
