"""The Slurm tests change the machine (Debian packages, daemons): without the opt-in they must not
try, whoever runs the suite."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_slurm_tests_skip_without_touching_the_machine_unless_opted_in(tmp_path):
    # every machine-changing command the start script could run, recorded instead of run
    calls = tmp_path / "calls.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("apt-get", "sinfo", "munged", "slurmctld", "slurmd", "slurmdbd", "mysqld", "mariadbd"):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\nexit 1\n')
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TORCHRL_GLAM_SLURM_TESTS")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SLURM_LOCAL_DIR=str(tmp_path / "slurm"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests" / "launch" / "test_slurm.py"),
            "-k",
            "seed_array",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 skipped" in done.stdout and "TORCHRL_GLAM_SLURM_TESTS=1" in done.stdout, done.stdout[-3000:]
    ran = calls.read_text() if calls.exists() else ""
    assert "apt-get" not in ran, ran
