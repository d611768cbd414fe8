"""Every code block of the README and of the documentation site's pages runs as written: Python
blocks are executed; each command of a shell block is checked without its hours of training (a
training script's command line is parsed into its config, which validates presets and fields; the
launcher runs with ``--dry-run``; other modules must accept ``--help``). ``pip`` lines are what
``.ci/run`` itself executes."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from torchrl_glam.training.run import parse_command_line
from torchrl_glam.training.scripts import get_script

ROOT = Path(__file__).resolve().parents[1]
# the README and the documentation site's Markdown pages (experiments/babyai/design_notes.md is included by the site)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "site").glob("*.md")), ROOT / "experiments" / "babyai" / "design_notes.md"]


def code_blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, code) of every fenced block of ``language`` in the user-facing pages."""
    blocks, seen = [], set()
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            if match.group(1) not in seen:  # a block the README and a page share runs once
                seen.add(match.group(1))
                blocks.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


def shell_commands() -> list[tuple[str, list[str]]]:
    commands, seen = [], set()
    for where, code in code_blocks("bash"):
        for line in code.splitlines():
            line = line.split(" #")[0].strip()
            for command in filter(None, (c.strip() for c in line.split("&&"))):
                if command not in seen:
                    seen.add(command)
                    commands.append((where, shlex.split(command)))
    return commands


@pytest.mark.parametrize("where, code", [pytest.param(w, c, id=w) for w, c in code_blocks("python")])
def test_python_block_runs(where, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize("where, argv", [pytest.param(w, a, id=f"{w} {' '.join(a)[:70]}") for w, a in shell_commands()])
def test_shell_command_is_valid(where, argv, tmp_path, capsys):
    if argv[0] == "pip":
        assert argv[1] == "install", where
        return
    assert argv[0] == "python", f"{where}: a command the test does not know how to check: {argv}"
    if argv[1].startswith("examples/"):
        name = Path(argv[1]).stem
        assert (ROOT / argv[1]).exists(), where
        if name == "playground_text":
            done = subprocess.run([sys.executable, str(ROOT / argv[1]), *argv[2:], "--episodes", "32"],
                                  capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
            assert done.returncode == 0, done.stderr[-3000:]
            return
        script = get_script(name)
        parse_command_line(script.config_class, script.presets, argv[2:])  # raises on a bad preset or field
        return
    assert argv[1] == "-m", where
    module, args = argv[2], argv[3:]
    if module == "torchrl_glam.launch":
        from torchrl_glam.launch.launcher import main

        args = [a if not a.startswith("slurm/") else str(ROOT / a) for a in args]
        assert main([*args, "--runs-root", str(tmp_path / "runs"), "--dry-run"]) == 0, where
        return
    # from the repository root, as the pages run it: experiments.* is the checkout's, not installed
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, f"{where}: {module} --help\n{done.stderr[-3000:]}"
