"""``--help`` lists each config field with its help line, read from the field's metadata: it works
from an install without the source files (byte-compiled only, as a frozen install), where help read
from the source's comments was empty."""

import compileall
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchrl_glam.algorithms.grpo_glam.config import GRPOGLAMConfig
from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig
from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.training.config import field_help, setting

ROOT = Path(__file__).resolve().parents[2]

#: In the sourceless copy: the help lines by path, and what ``--help`` printed.
PROBE = """
import contextlib, io, json, sys
from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.algorithms.sac_glam.train import main
from torchrl_glam.training.config import field_help

out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    main(["--help"])
import torchrl_glam.training.config.sections as sections
print(json.dumps({"help": field_help(SACGLAMConfig), "out": out.getvalue(), "file": sections.__file__}))
"""


@pytest.mark.parametrize("config_class", [SACGLAMConfig, PPOGLAMConfig, GRPOGLAMConfig])
def test_every_field_has_help_in_its_metadata(config_class):
    assert [path for path, text in field_help(config_class).items() if not text] == []


def test_help_needs_no_source(tmp_path):
    copy = tmp_path / "torchrl_glam"
    shutil.copytree(ROOT / "torchrl_glam", copy, ignore=shutil.ignore_patterns("__pycache__", "weights", "*.yaml"))
    shutil.copytree(
        ROOT / "torchrl_glam" / "algorithms" / "sac_glam" / "presets",
        copy / "algorithms" / "sac_glam" / "presets",
        dirs_exist_ok=True,
    )
    assert compileall.compile_dir(copy, legacy=True, quiet=1)  # module.pyc beside module.py, importable alone
    for source in copy.rglob("*.py"):
        source.unlink()
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["file"].endswith(".pyc") and found["file"].startswith(str(tmp_path))
    assert found["help"] == field_help(SACGLAMConfig)
    shown = " ".join(found["out"].split())
    assert [path for path, text in found["help"].items() if " ".join(text.split()) not in shown] == []


def test_a_field_says_what_it_is():
    with pytest.raises(ValueError, match="says what it is"):
        setting(0)
