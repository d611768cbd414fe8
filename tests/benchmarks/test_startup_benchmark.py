"""The start-up benchmark (``python -m torchrl_glam.benchmarks.startup``) runs its commands and
prints a median per command; its ``--compare`` refuses an unknown commit. Nothing is timed here."""

import pytest

from torchrl_glam.benchmarks import startup


def test_it_prints_a_median_per_command(capsys):
    startup.main(["--repeats", "1"])
    out = capsys.readouterr().out
    for argv, _ in startup.COMMANDS:
        assert " ".join(argv) in out
    assert out.count(" s\n") == len(startup.COMMANDS)


def test_a_command_that_does_not_exit_as_expected_is_named(tmp_path):
    with pytest.raises(SystemExit, match="exited 1, not 0"):
        startup.time_command(tmp_path, ("-c", "raise SystemExit(1)"), 0)


def test_compare_names_an_unknown_commit():
    with pytest.raises(SystemExit, match="no such commit"):
        startup.main(["--compare", "no-such-commit-anywhere", "--repeats", "1"])
