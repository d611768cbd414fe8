"""A wheel install (``pip install .``, not editable), outside the source tree: its metadata has the
package's version; it runs the launcher's ``--local`` smoke on Playground-Text (the training scripts
are found by import name, not as files of a source checkout), and the ``sac-glam`` command trains
each other shipped environment's smallest preset (``smoke_babyai``, ``smoke_textworld``: their
presets, vocabularies and tiny models come from the wheel) and the TextWorld preset, whose pretrained
tiny T5 the wheel ships (nothing is pretrained). TextWorld's games pool is built into
the default cache (``$TORCHRL_GLAM_CACHE``) on first use (~4 min), reused after."""

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import torchrl_glam

ROOT = Path(__file__).resolve().parents[2]


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _borrow_site_packages(python: Path) -> None:
    """Puts this interpreter's site-packages after the new venv's own (a ``.pth`` file of plain paths:
    their own ``.pth`` files, such as the checkout's editable install, are not processed)."""
    venv_site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    ours = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    (Path(venv_site) / "borrowed_site_packages.pth").write_text("\n".join(ours) + "\n")


@pytest.mark.slow
def test_wheel_install_runs_the_launcher_local_smoke(tmp_path):
    # the package's sources only (no examples/, tests/ or build leftovers of the checkout)
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "torchrl_glam", source / "torchrl_glam", ignore=shutil.ignore_patterns("__pycache__"))
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ]
    )
    wheel = next((tmp_path / "dist").glob("torchrl_glam-*.whl"))
    assert wheel.name.startswith(f"torchrl_glam-{torchrl_glam.__version__}-"), wheel.name

    # a fresh venv that borrows torch & co. from the interpreter running the tests, with the wheel
    # installed into it. ``--system-site-packages`` would borrow from the *base* interpreter, which
    # lacks them when the tests run inside a virtual environment.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    _borrow_site_packages(python)
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])

    # run from an empty folder, with nothing pointing at a checkout
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    where = _run(
        [str(python), "-c", "import torchrl_glam.algorithms.sac_glam.train as m; print(m.__file__)"], cwd=work, env=env
    ).strip()
    assert Path(where).is_relative_to(venv), where  # the venv's copy, not /work/*
    versions = _run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, torchrl_glam; print(m.version('torchrl_glam'), torchrl_glam.__version__)",
        ],
        cwd=work,
        env=env,
    )
    assert versions.split() == [torchrl_glam.__version__] * 2, versions

    out = _run(
        [
            str(bin_dir / "torchrl-glam-launch"),
            "--seeds",
            "0",
            "--preset",
            "smoke",
            "--local",
            "--wait",
            "--runs-root",
            str(work / "runs"),
            "total_steps=96",
            "eval_every=96",
            "checkpoint_every=96",
            "learning_starts=16",
        ],
        cwd=work,
        env=env,
        timeout=900,
    )
    run = work / "runs" / "smoke" / "seed0"
    assert f"done   {run}" in out, out
    assert (run / "checkpoint.pt").exists() and (run / "evaluations.jsonl").exists()
    job_logs = "".join(p.read_text() for p in (work / "runs" / "submitit").rglob("*.out"))
    assert "done: 96 steps" in job_logs, job_logs[-3000:]  # the job's own final report

    # the other environments' smallest presets, long enough for the first updates
    for preset in ("smoke_babyai", "smoke_textworld"):
        run = work / "runs" / preset
        out = _run(
            [str(bin_dir / "sac-glam"), "--preset", preset, "--no-progress", "--run-dir", str(run)]
            + ["total_steps=200", "eval_every=200", "checkpoint_every=200", "eval_episodes=8"],
            cwd=work,
            env=env,
            timeout=900,
        )
        done = next(line for line in out.splitlines() if line.startswith("done: "))
        assert done.startswith("done: 200 steps, ") and not done.startswith("done: 200 steps, 0 updates"), out[-3000:]
        assert (run / "checkpoint.pt").exists() and (run / "evaluations.jsonl").exists()

    # the TextWorld preset's pretrained tiny T5 comes from the wheel: it trains at once, nothing pretrained
    run = work / "runs" / "cpu_textworld_coin_collector"
    trained = subprocess.run(
        [str(bin_dir / "sac-glam"), "--preset", "cpu_textworld_coin_collector", "--no-progress", "--run-dir", str(run)]
        + ["total_steps=64", "eval_every=64", "checkpoint_every=64", "eval_episodes=2", "learning_starts=16"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=900,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "done: 64 steps, " in trained.stdout and "pretraining" not in trained.stderr, trained.stderr[-3000:]
