"""Every code block of the README and of the documentation site's pages runs as written: Python
blocks are executed; each command of a shell block is checked without its hours of training (a
training script's command line is parsed into its config, which validates presets and fields; the
launcher runs with ``--dry-run``; other modules must accept ``--help``). ``pip`` lines are what
``.ci/run`` itself executes."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from page_commands import ROOT, code_blocks, dry_run_launch, parse_training_command, shell_commands

# the README and the documentation site's Markdown pages (experiments/babyai/design_notes.md is included by the site)
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs" / "site").glob("*.md")),
    ROOT / "experiments" / "babyai" / "design_notes.md",
]


@pytest.mark.parametrize("where, code", [pytest.param(w, c, id=w) for w, c in code_blocks(PAGES, "python")])
def test_python_block_runs(where, code, tmp_path, monkeypatch):
    from torchrl_glam.envs import environment_names, unregister_environment

    monkeypatch.chdir(tmp_path)
    registered = set(environment_names())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(code, where, "exec"), {"__name__": "__readme__"})
    finally:  # an environment a block registers is the block's, not the next tests'
        for name in set(environment_names()) - registered:
            unregister_environment(name)
    # a block that builds a loss with target networks also builds TorchRL's updater of them, as a
    # user's script must (TorchRL warns otherwise)
    assert not [str(w.message) for w in caught if "No target network updater" in str(w.message)]


@pytest.mark.parametrize(
    "where, argv", [pytest.param(w, a, id=f"{w} {' '.join(a)[:70]}") for w, a in shell_commands(PAGES)]
)
def test_shell_command_is_valid(where, argv, tmp_path, capsys):
    if argv[0] == "pip":
        assert argv[1] == "install", where
        return
    assert argv[0] == "python", f"{where}: a command the test does not know how to check: {argv}"
    if argv[1].startswith("examples/"):
        name = Path(argv[1]).stem
        assert (ROOT / argv[1]).exists(), where
        if name == "playground_text":
            done = subprocess.run(
                [sys.executable, str(ROOT / argv[1]), *argv[2:], "--episodes", "32"],
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            assert done.returncode == 0, done.stderr[-3000:]
            return
        parse_training_command(argv)
        return
    assert argv[1] == "-m", where
    module, args = argv[2], argv[3:]
    if module == "torchrl_glam.launch":
        assert dry_run_launch(args, tmp_path / "runs") == 0, where
        return
    # from the repository root, as the pages run it: experiments.* is the checkout's, not installed
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, f"{where}: {module} --help\n{done.stderr[-3000:]}"
