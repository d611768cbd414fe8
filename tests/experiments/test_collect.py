"""experiments.tools.collect: a finished run's record (never its checkpoints) copied into an
experiment's folder under the names its README lists; a stopped run refused unless --partial."""

import json

from experiments.tools.collect import main


def _run(root, evaluated_to, total=400, her=True):
    """The files a training run writes (checkpoint included), evaluated every 200 steps."""
    run = root / "run"
    (run / "logs/scalars/train").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"run": {"total_steps": total, "seed": 0}}))
    (run / "environment.json").write_text(json.dumps({"git": {"commit": "abc"}}))
    lines = [json.dumps({"env_steps": s, "set": "train", "success": 0.5}) for s in range(200, evaluated_to + 1, 200)]
    (run / "evaluations.jsonl").write_text("\n".join(lines) + '\n{"env_steps": 60')  # a torn last line
    (run / "logs/scalars/train/success.csv").write_text("step,value\n400,0.5\n")
    if her:
        for part in ("replay", "batch"):
            (run / "logs/scalars" / part).mkdir()
            (run / "logs/scalars" / part / "relabeled_share.csv").write_text(f"step,value\n400,{part}\n")
    (run / "checkpoint.pt").write_bytes(b"\0" * 1024)
    return run


def test_a_finished_runs_record_is_copied_under_the_readmes_names_without_its_checkpoint(tmp_path, capsys):
    run, out = _run(tmp_path, 400), tmp_path / "record" / "seed0"
    assert main([str(run), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "batch_relabeled_share.csv",
        "config.json",
        "environment.json",
        "evaluations.jsonl",
        "relabeled_share.csv",
        "train_success.csv",
    ]
    assert (out / "batch_relabeled_share.csv").read_text().endswith("batch\n")
    assert (out / "evaluations.jsonl").read_bytes() == (run / "evaluations.jsonl").read_bytes()
    assert str(out / "config.json") in capsys.readouterr().out


def test_a_stopped_run_is_refused_naming_its_steps_unless_partial(tmp_path, capsys):
    run, out = _run(tmp_path, 200, her=False), tmp_path / "record"
    assert main([str(run), str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: {run} has evaluations up to 200 of its 400 steps") and "--partial" in error
    assert not out.exists()
    assert main([str(run), str(out), "--partial"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "environment.json",
        "evaluations.jsonl",
        "train_success.csv",
    ]


def test_a_folder_that_is_no_run_is_refused_naming_what_it_lacks(tmp_path, capsys):
    assert main([str(tmp_path), str(tmp_path / "record")]) == 2
    assert "lacks config.json, environment.json, evaluations.jsonl" in capsys.readouterr().err
