"""The commands a Markdown page gives, and the checks that run them without their hours of
training: shared by the README's test (tests/test_readme.py) and the research record's
(tests/experiments/test_commands.py)."""

import re
import shlex
from pathlib import Path

from torchrl_glam.algorithms import get_script
from torchrl_glam.training.run import parse_command_line

ROOT = Path(__file__).resolve().parents[1]


def code_blocks(pages: list[Path], language: str) -> list[tuple[str, str]]:
    """(page:line, code) of every fenced block of ``language`` in ``pages``."""
    blocks, seen = [], set()
    for page in pages:
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            if match.group(1) not in seen:  # a block the README and a page share runs once
                seen.add(match.group(1))
                blocks.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


def command_lines(pages: list[Path]) -> list[tuple[str, str]]:
    """(page:line, command) of every command of the ``bash`` blocks of ``pages``: a line split at
    ``&&``, its comment dropped, a backslash-continued line joined to the next; each once."""
    commands, seen = [], set()
    for where, code in code_blocks(pages, "bash"):
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            for command in filter(None, (c.strip() for c in line.split("&&"))):
                if command not in seen:
                    seen.add(command)
                    commands.append((where, command))
    return commands


def shell_commands(pages: list[Path]) -> list[tuple[str, list[str]]]:
    """:func:`command_lines`, each split into its argv."""
    return [(where, shlex.split(command)) for where, command in command_lines(pages)]


def parse_training_command(argv: list[str]):
    """The config of ``python examples/<algorithm>.py ...``, through the script's own command-line
    parser (which raises on a bad preset or field)."""
    script = get_script(Path(argv[1]).stem)
    args = [a if not a.startswith("experiments/") else str(ROOT / a) for a in argv[2:]]  # a study's preset file
    config, _ = parse_command_line(script.config_class, script.presets, args)
    return config


def dry_run_launch(args: list[str], runs_root: Path) -> int:
    """``python -m torchrl_glam.launch ARGS`` with ``--dry-run``: every run's config is validated."""
    from torchrl_glam.launch.launcher import main

    args = [a if not a.startswith(("slurm/", "experiments/")) else str(ROOT / a) for a in args]
    return main([*args, "--runs-root", str(runs_root), "--dry-run"])
