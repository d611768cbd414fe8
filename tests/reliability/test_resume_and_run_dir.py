"""Issue 12, defects 2 and 3: a resume changes only what it may (and really applies it, learning
rates included), refuses the rest naming each field's two values; run dirs are protected against a
second run and a second live process (a lock that kill -9 never leaves stale)."""

import json
import signal
import subprocess
import time

import pytest
import torch
from reliability_helpers import PYTHON, ROOT, subprocess_env

from torchrl_glam.algorithms.sac_glam.config import make_config


def _resume():  # imported where used: the code before the fix had no such module
    from torchrl_glam.training import resume

    return resume


def _rundir():
    from torchrl_glam.training import rundir

    return rundir


SMOKE = ["--no-progress", "total_steps=48", "eval_every=48", "checkpoint_every=48"]


def test_resume_changes_refuses_settings_a_checkpoint_fixes():
    resume_changes = _resume().resume_changes
    saved = make_config("smoke").to_dict()
    with pytest.raises(ValueError) as err:
        resume_changes(saved, make_config("smoke", {"gamma": 0.5, "n_step": 2, "actor_lr": 0.01}))
    message = str(err.value)
    assert "algorithm.gamma: saved 0.99, now 0.5" in message and "algorithm.n_step: saved 3, now 2" in message
    assert "actor_lr" not in message.split("(")[1].split(")")[0]  # allowed: not among the refused
    assert "--run-dir" in message
    changes = resume_changes(saved, make_config("smoke", {"total_steps": 800, "critic_lr": 0.01}))
    assert changes == {"run.total_steps": (400, 800), "algorithm.critic_lr": (1e-4, 0.01)}


def test_every_rate_the_config_declares_may_change_but_not_to_or_from_none():
    # SAC-GLAM's rates include critic_llm_lr and the LLM rates' decay (issue 74: the harness knew
    # only actor_lr, critic_lr, alpha_lr and lr); None -> a rate would add an optimiser the checkpoint lacks
    resume_changes = _resume().resume_changes
    saved = make_config("smoke", {"critic_llm_lr": 1e-3}).to_dict()
    new = {"critic_llm_lr": 3e-4, "actor_lr_decay_at": 100, "actor_lr_decay": 0.5, "alpha_lr": 0.01}
    assert set(resume_changes(saved, make_config("smoke", new))) == {f"algorithm.{name}" for name in new}
    with pytest.raises(ValueError, match=r"algorithm.critic_llm_lr: saved 0.001, now None"):
        resume_changes(saved, make_config("smoke", {"critic_llm_lr": None}))


@pytest.mark.parametrize("example", ["sac_glam", "ppo_glam"])
def test_resume_refuses_a_mixed_run_and_applies_learning_rates(tmp_path, example, request):
    main = request.getfixturevalue(f"{example[:3]}_example").main
    run = tmp_path / "run"
    common = ["--preset", "smoke", "--run-dir", str(run), *SMOKE]
    assert main(common) == 0
    config_before = (run / "config.json").read_text()
    with pytest.raises(ValueError, match=r"algorithm.gamma: saved 0.99, now 0.5"):
        main([*common, "--resume", "gamma=0.5"])
    assert (run / "config.json").read_text() == config_before  # config.json stays truthful
    lr_field = "actor_lr" if example == "sac_glam" else "lr"
    assert main([*common, "--resume", "total_steps=96", f"{lr_field}=0.0123"]) == 0
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    optimizer = state["updater"]["llm_optimizer" if example == "sac_glam" else "optimizer"]
    assert {group["lr"] for group in optimizer["param_groups"]} == {0.0123}
    assert json.loads((run / "config.json").read_text())["algorithm"][lr_field] == 0.0123
    event = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()][-1]
    assert event["event"] == "resume" and event["changed"][f"algorithm.{lr_field}"] == {"saved": 1e-4, "now": 0.0123}


def test_a_resume_continues_the_saved_config_without_repeating_its_overrides(tmp_path, sac_example):
    # the run was started with non-default values; --resume names only what changes now
    run = tmp_path / "run"
    assert sac_example.main(["--preset", "smoke", "--run-dir", str(run), *SMOKE, "batch_size=16", "n_step=2"]) == 0
    assert (
        sac_example.main(["--preset", "smoke", "--run-dir", str(run), "--no-progress", "--resume", "total_steps=96"])
        == 0
    )
    saved = json.loads((run / "config.json").read_text())
    assert (saved["algorithm"]["batch_size"], saved["algorithm"]["n_step"], saved["run"]["total_steps"]) == (16, 2, 96)


def test_an_existing_run_dir_is_refused_without_resume_and_cleared_with_overwrite(tmp_path, sac_example):
    run = tmp_path / "run"
    common = ["--preset", "smoke", "--run-dir", str(run), *SMOKE]
    assert sac_example.main(common) == 0
    with pytest.raises(RuntimeError, match=r"--resume.*--run-dir.*--overwrite"):
        sac_example.main(common)
    (run / "stale-note.txt").write_text("the user's, not the run's")
    with pytest.raises(RuntimeError, match=r"stale-note.txt, which no run wrote.*Nothing was deleted"):
        sac_example.main([*common, "--overwrite"])  # issue 69: --overwrite deletes only what the run wrote
    assert (run / "stale-note.txt").read_text() == "the user's, not the run's"
    (run / "stale-note.txt").unlink()
    assert sac_example.main([*common, "--overwrite"]) == 0
    evaluations = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert sorted(e["set"] for e in evaluations) == ["held_out", "train"]  # one run's rows, not two


def _example(run, *extra, **kwargs):
    command = [
        PYTHON,
        str(ROOT / "examples" / "sac_glam.py"),
        "--preset",
        "smoke",
        "--run-dir",
        str(run),
        "--no-progress",
        "--resume",
        *extra,
    ]
    return subprocess.Popen(
        command, cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


@pytest.mark.slow
def test_a_second_live_process_is_refused_and_kill_9_leaves_no_stale_lock(tmp_path):
    run = tmp_path / "run"
    holder = _example(run, "total_steps=1000000")
    try:
        deadline = time.time() + 120
        while not (run / "config.json").exists():  # written once the holder owns the run dir
            assert holder.poll() is None and time.time() < deadline, holder.communicate()[1][-2000:]
            time.sleep(0.2)
        second = _example(run, "total_steps=16")
        _, err = second.communicate(timeout=120)
        assert second.returncode != 0 and "in use by another live process" in err, err[-2000:]
        assert f"pid {holder.pid}" in err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    third = _example(run, "total_steps=16")  # the kernel released the killed holder's lock
    _, err = third.communicate(timeout=120)
    assert third.returncode == 0, err[-2000:]


def test_ranks_above_zero_neither_lock_nor_clear(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    rundir = _rundir()
    with pytest.raises(rundir.RunDirError):
        rundir.prepare_run_dir(run, resume=False, rank=1)  # every rank refuses the same way
    rundir.prepare_run_dir(run, resume=False, overwrite=True, rank=1)
    assert (run / "logs").exists() and not (run / ".lock").exists()


def test_a_run_folder_records_what_it_ran_on_and_a_resume_elsewhere_says_what_changed(tmp_path, sac_example, caplog):
    # issue 70: the same command on another machine gave other numbers, and nothing said why
    from torchrl_glam.training import provenance

    run = tmp_path / "run"
    common = ["--preset", "smoke", "--run-dir", str(run), *SMOKE]
    assert sac_example.main(common) == 0
    record = json.loads((run / "environment.json").read_text())
    assert record["packages"]["torch"] and record["packages"]["torchrl_glam"]
    assert record["torch"]["threads"] == torch.get_num_threads() and record["torch"]["build"] in ("CPU", "CUDA")
    assert {"model", "flags"} <= set(record["cpu"]) and record["python"] and "commit" in record["git"]
    assert "Ran on: torch " in (run / "report.md").read_text()
    # the run so far ran under another torch on a CPU with other flags
    record["packages"]["torch"], record["cpu"]["flags"] = "2.0.0", ["avx512_bf16"]
    (run / "environment.json").write_text(json.dumps(record))
    caplog.clear()
    assert sac_example.main([*common, "--resume", "total_steps=96"]) == 0
    # a logging warning: on stderr when nothing configures logging (the message alone)
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "bitwise" in r.getMessage()]
    assert len(warning) == 1 and f"torch 2.0.0 -> {provenance.current_environment()['packages']['torch']}" in warning[0]
    assert "CPU flags differ" in warning[0]
    assert json.loads((run / "environment.json").read_text())["packages"]["torch"] != "2.0.0"  # now this one's
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "environment_changed" for e in events)


def test_the_environment_record_survives_a_missing_git(monkeypatch):
    from torchrl_glam.training import provenance

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    record = provenance.current_environment()
    assert record["git"] == {"commit": None, "dirty": None, "diff_sha256": None}
    assert "commit unknown" in provenance.environment_summary(record)


def test_a_cpu_run_on_a_gpu_build_of_torch_is_said_to_run_on_the_cpu():
    from torchrl_glam.training import provenance

    record = provenance.current_environment()
    record["torch"].update(build="CUDA", cuda="13.2", threads=1)
    record["gpu"] = None
    assert "(CPU, a CUDA 13.2 build, 1 thread)" in provenance.environment_summary(record)
    record["gpu"] = "NVIDIA H100"
    assert "(CUDA 13.2, 1 thread)" in provenance.environment_summary(record)
