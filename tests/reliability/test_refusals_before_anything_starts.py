"""Issue 69, items 3 and 4: the launcher refuses before submitting exactly what its jobs would
refuse, in one line (exit 2); the scripts refuse bad input in one line, before torch loads where
they can, leaving nothing behind."""

import json
import sys

import pytest

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "training"))
from test_light_command_line import HEAVY, PROBE, probe  # noqa: E402

from torchrl_glam.launch.launcher import cli as launch  # noqa: E402


def _one_line_refusal(capsys, says: str) -> None:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    assert says in err, err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--seeds", "3-1"], "bad seed range '3-1'"),
        (["--seeds", "a"], "bad seed 'a'"),
        (["gamma=nan"], "algorithm.gamma=nan: expected a finite number"),
        (["batch_size=abc"], "algorithm.batch_size='abc'"),
        (["seed=5"], "use --seeds"),
    ],
)
def test_the_launcher_refuses_in_one_line(tmp_path, capsys, args, says):
    assert launch(["--preset", "smoke", "--dry-run", "--runs-root", str(tmp_path), *args]) == 2
    _one_line_refusal(capsys, says)


def test_the_launchers_dry_run_refuses_what_the_jobs_resume_would(tmp_path, capsys, sac_example):
    run = tmp_path / "smoke" / "seed0"
    assert sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--no-progress", "total_steps=16"]) == 0
    (run / "launch.json").write_text('{"job_id": "1"}')
    common = ["--preset", "smoke", "--runs-root", str(tmp_path)]
    assert launch([*common, "--dry-run", "gamma=0.9"]) == 2
    _one_line_refusal(capsys, "algorithm.gamma: saved 0.99, now 0.9")
    assert launch([*common, "--local", "gamma=0.9"]) == 2  # nothing submitted
    _one_line_refusal(capsys, "algorithm.gamma: saved 0.99, now 0.9")
    assert (run / "launch.json").read_text() == '{"job_id": "1"}'  # launch.json not rewritten
    assert launch([*common, "--dry-run", "total_steps=32"]) == 0  # what a resume may change passes
    (run / "config.json").write_text("garbage")
    assert launch([*common, "--dry-run"]) == 2
    _one_line_refusal(capsys, "config.json is unreadable")


@pytest.mark.slow
def test_the_local_executor_keeps_to_the_array_parallelism(tmp_path):
    common = ["--preset", "smoke", "--runs-root", str(tmp_path), "--local", "total_steps=16", "eval_every=16"]
    assert launch([*common, "--seeds", "0-1", "--array-parallelism", "1"]) == 0
    first, second = (tmp_path / "smoke" / f"seed{k}" for k in (0, 1))
    # one at a time: the second run started (its config) after the first ended (its report)
    assert (second / "config.json").stat().st_mtime >= (first / "report.md").stat().st_mtime


def _refused(tmp_path, argv, says, *, light=True):
    done, (code, imported) = probe(PROBE.format(script="sac_glam", argv=argv, heavy=HEAVY))
    assert code == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    if light:
        assert "torch" not in imported, imported


def test_a_run_dir_that_is_a_file_or_too_long_or_empty_is_refused_before_torch(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    _refused(tmp_path, ["--run-dir", str(afile)], "is an existing file, not a folder")
    assert afile.read_text() == "mine"
    _refused(tmp_path, ["--run-dir", str(tmp_path / ("a" * 300))], "folder name of 300 bytes")
    _refused(tmp_path, ["--run-dir", ""], "run.run_dir=''")
    _refused(tmp_path, ["--resume", "--overwrite", "--run-dir", str(tmp_path / "r")], "contradict each other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing created


@pytest.mark.parametrize(
    "text, says",
    [
        ("extends: [smoke]\n", "a preset extends one preset, by name"),
        ("# only a comment\n", "holds no settings"),
        ("extends: smoke\nrun:\n  total_steps: 5\n  total_steps: 6\n", "total_steps given twice"),
        (b"\xff\xfe run: 1\n", "is not UTF-8 text"),
    ],
)
def test_a_bad_preset_file_is_refused_in_one_line(tmp_path, text, says):
    preset = tmp_path / "mine.yaml"
    preset.write_bytes(text if isinstance(text, bytes) else text.encode())
    _refused(tmp_path, ["--preset", str(preset), "--run-dir", str(tmp_path / "r")], says)


def test_resume_without_a_readable_config_names_it(tmp_path, sac_example, capsys):
    run = tmp_path / "run"
    argv = ["--preset", "smoke", "--run-dir", str(run), "--no-progress", "total_steps=16", "batch_size=8"]
    assert sac_example.main(argv) == 0
    (run / "config.json").write_text("not json")
    from torchrl_glam.training.rundir import release_run_dir

    release_run_dir(run)
    with pytest.raises(RuntimeError, match=r"config.json is unreadable \(not JSON\).*put back that run's config.json"):
        sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"])
    (run / "config.json").unlink()  # missing: the preset's settings differ from the run's (batch_size=8)
    with pytest.raises(
        ValueError, match=r"config.json is missing, so --resume took.*algorithm.batch_size: saved 8, now 32"
    ):
        sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--resume", "total_steps=32"])


def test_resume_where_there_is_no_run_says_it_starts_afresh(tmp_path, sac_example, capsys):
    run = tmp_path / "run"
    argv = ["--preset", "smoke", "--run-dir", str(run), "--no-progress", "total_steps=16", "--resume"]
    assert sac_example.main(argv) == 0
    assert "holds no run yet, so this starts a fresh run there" in capsys.readouterr().out
    assert json.loads((run / "config.json").read_text())["run"]["total_steps"] == 16


def test_replay_that_cannot_fit_is_refused_with_its_estimate_before_allocating(tmp_path):
    # 2 buffers of 2^30 slots: ~64 GiB of priority trees, more than any test machine has available
    _refused(
        tmp_path,
        ["--run-dir", str(tmp_path / "r"), "buffer_capacity=1000000000"],
        "priority trees need about 64.0 GiB but this machine has",
        light=False,
    )


def test_a_model_that_cannot_be_found_is_refused_at_once(tmp_path, monkeypatch):
    _refused(tmp_path, ["--run-dir", str(tmp_path / "r"), "model=/nonexistent"], "model.name='/nonexistent': no such")
    # the hub cannot be reached (HF_HUB_OFFLINE=1, as on CI): said at once, with what to pass instead
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _refused(
        tmp_path,
        ["--run-dir", str(tmp_path / "r"), "model=nosuchmodel"],
        "the hub cannot be reached from this machine (offline). Pass model=",
        light=False,  # smollm2-135m, a packaged model, is looked up in torchrl_glam.modules
    )
    assert not (tmp_path / "r").exists()  # nothing left behind


def test_a_huge_value_is_refused_fast_and_echoed_abbreviated(tmp_path):
    import yaml

    preset = tmp_path / "big.yaml"
    preset.write_text(yaml.safe_dump({"extends": "smoke", "run": {"eval_sets": ["train"] * 200_000}}))
    _refused(tmp_path, ["--preset", str(preset)], "a list of 200000 entries")  # was minutes
    done, (code, _) = probe(PROBE.format(script="sac_glam", argv=["normalization=" + "x" * 100_000], heavy=HEAVY))
    assert code == 2 and "(100002 characters)" in done.stderr and len(done.stderr) < 1000
