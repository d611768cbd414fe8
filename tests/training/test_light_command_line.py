"""The command line answers before the heavy imports: ``--help`` and the refusals of the parser
(an unknown field, a value of the wrong type, an unknown preset, an override that is not
key=value) import neither torch, tensordict, torchrl, transformers nor the environments, so they
answer in a fraction of a second instead of the seconds those imports take. Not timed (these
machines are noisy): each case runs in a fresh interpreter that reports what it imported."""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "tensordict", "torchrl", "transformers", "torchrl_glam.envs")

#: Runs a script's ``cli(argv)`` and prints its exit code and the heavy modules it imported.
PROBE = """
import json, sys
from torchrl_glam.algorithms.{script}.train import cli
try:
    code = cli({argv!r})
except SystemExit as stop:
    code = stop.code
print("PROBE " + json.dumps([code, sorted(m for m in {heavy!r} if m in sys.modules)]))
"""


def probe(code: str) -> tuple[subprocess.CompletedProcess, list]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert lines, done.stdout + done.stderr
    return done, json.loads(lines[-1].removeprefix("PROBE "))


@pytest.mark.parametrize(
    "script, argv, exit_code, says",
    [
        ("sac_glam", ["--help"], 0, "batch_size="),
        ("ppo_glam", ["--help"], 0, "minibatch_size="),
        ("sac_glam", ["nosuchfield=1"], 2, "unknown config field 'nosuchfield'"),
        ("sac_glam", ["batch_size=abc"], 2, "bad config value algorithm.batch_size='abc'"),
        ("sac_glam", ["--preset", "nosuch"], 2, "unknown preset 'nosuch'; choose one of"),
        ("sac_glam", ["batch_size"], 2, "is not key=value"),
    ],
)
def test_help_and_parser_refusals_import_nothing_heavy(script, argv, exit_code, says):
    done, (code, imported) = probe(PROBE.format(script=script, argv=argv, heavy=HEAVY))
    assert code == exit_code, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert imported == [], f"{script} {argv} imported {imported}"


def test_the_configs_and_the_script_registry_import_nothing_heavy():
    code = (
        "import json, sys\n"
        "import torchrl_glam.training.cli, torchrl_glam.training.config, torchrl_glam.training.eval_sets\n"
        "from torchrl_glam.algorithms import get_script\n"
        "for name in ('sac_glam', 'ppo_glam'):\n"
        "    script = get_script(name)\n"
        "    script.config_class().replace(**script.presets['cpu'])\n"
        f"print('PROBE ' + json.dumps([0, sorted(m for m in {HEAVY!r} if m in sys.modules)]))\n"
    )
    _, (_, imported) = probe(code)
    assert imported == []


def test_a_refusal_that_needs_the_environment_still_names_the_field(tmp_path, capsys):
    from torchrl_glam.algorithms.sac_glam.train import cli

    assert cli(["goals=nosuch", "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad config value env.goals='nosuch'") and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_the_configs_default_environment_is_the_registrys():
    from torchrl_glam.envs import registry
    from torchrl_glam.training import config

    assert config.DEFAULT_ENVIRONMENT == registry.DEFAULT_ENVIRONMENT
    assert config.GLAMConfig().environment.name == registry.get_environment(registry.DEFAULT_ENVIRONMENT).name


def test_evaluation_still_exports_the_evaluation_sets():
    from torchrl_glam.training import eval_sets, evaluation

    assert evaluation.EVAL_SETS is eval_sets.EVAL_SETS and evaluation.EvalSet is eval_sets.EvalSet


def test_the_harness_still_exports_the_command_line():
    from torchrl_glam.training import cli, run

    assert run.parse_command_line is cli.parse_command_line and run.command_line is cli.command_line
    assert run.RunOptions is cli.RunOptions and run.default_run_dir is cli.default_run_dir
    assert [error.__name__ for error in run.USER_ERRORS] == [name for _, name in cli.USER_ERROR_CLASSES]
    assert set(cli.user_errors()) == set(run.USER_ERRORS)  # all imported by now
