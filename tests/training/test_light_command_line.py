"""The command line answers before the heavy imports: ``--help`` and the refusals of the parser
(an unknown field, a value of the wrong type, an unknown preset, an override that is not
key=value) import neither torch, tensordict, torchrl nor transformers (``--help`` and an unknown
name load the chosen environment's declaration, for its options; the other refusals not even
that), so they answer in a fraction of a second instead of the seconds those imports take. Not timed (these
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


#: What ``--help`` and the refusal of a name no field has may import besides: the chosen
#: environment's declaration (its options), not the code that builds it
BUILDING = ("torch", "tensordict", "torchrl", "transformers", "torchrl_glam.envs.playground.torchrl_env")


@pytest.mark.parametrize(
    "script, argv, exit_code, says, heavy",
    [
        ("sac_glam", ["--help"], 0, "batch_size=", BUILDING),
        ("ppo_glam", ["--help"], 0, "minibatch_size=", BUILDING),
        ("grpo_glam", ["--help"], 0, "group_size=", BUILDING),
        ("sac_glam", ["nosuchfield=1"], 2, "unknown config field 'nosuchfield'", BUILDING),
        ("sac_glam", ["batch_size=abc"], 2, "bad config value algorithm.batch_size='abc'", HEAVY),
        ("sac_glam", ["--preset", "nosuch"], 2, "unknown preset 'nosuch'; choose one of", HEAVY),
        ("sac_glam", ["batch_size"], 2, "is not key=value", HEAVY),
    ],
)
def test_help_and_parser_refusals_import_nothing_heavy(script, argv, exit_code, says, heavy):
    done, (code, imported) = probe(PROBE.format(script=script, argv=argv, heavy=heavy))
    assert code == exit_code, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert imported == [], f"{script} {argv} imported {imported}"


def test_the_configs_and_the_script_registry_import_nothing_heavy():
    code = (
        "import json, sys\n"
        "import torchrl_glam.training.cli, torchrl_glam.training.config, torchrl_glam.training.eval_sets\n"
        "from torchrl_glam.algorithms import get_script\n"
        "for name in ('sac_glam', 'ppo_glam', 'grpo_glam'):\n"
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


#: What a refusal that needs the environment's metadata may not import: the environments load,
#: torch, tensordict and TorchRL do not (they are imported when an environment is built).
TORCH = ("torch", "tensordict", "torchrl", "transformers")


@pytest.mark.parametrize(
    "script, argv, says",
    [
        ("sac_glam", ["goals=nosuchset"], "bad config value env.goals='nosuchset': expected a goal set of env="),
        ("sac_glam", ["num_objects=99"], "bad config value env.options.num_objects=99"),
        ("sac_glam", ["--preset", "cpu_babyai", "goals=nosuch"], "bad config value env.goals='nosuch'"),
        ("sac_glam", ["--preset", "cpu_babyai", "history=99"], "bad config value env.options.history=99"),
        ("sac_glam", ["--preset", "cpu_babyai", "lp_groups=nosuch"], "bad config value algorithm.lp_groups="),
        ("sac_glam", ["--preset", "cpu_babyai", "autotelic=uniform"], "bad config value algorithm.autotelic="),
        (
            "sac_glam",
            ["history=2"],
            "unknown config field 'history': not a field of SACGLAMConfig, nor an option of env='playground'",
        ),
        ("sac_glam", ["env=nosuch"], "bad config value env.name='nosuch'"),
        ("sac_glam", ["device=nosuch"], "bad config value model.device='nosuch'"),
        ("ppo_glam", ["goals=nosuchset"], "bad config value env.goals='nosuchset'"),
    ],
)
def test_refusals_that_need_the_environment_import_no_torch(script, argv, says):
    done, (code, imported) = probe(PROBE.format(script=script, argv=argv, heavy=TORCH))
    assert code == 2, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert imported == [], f"{script} {argv} imported {imported}"


def test_a_gpu_this_machine_lacks_is_refused_before_torchrl_loads():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done, (code, imported) = probe(PROBE.format(script="sac_glam", argv=["device=cuda"], heavy=TORCH))
    assert code == 2 and "model.device='cuda' but torch sees no CUDA GPU" in done.stderr, done.stderr
    # a CPU build of torch is known by its version label; another is asked whether it sees a GPU
    cpu_build = torch.__version__.endswith("+cpu")
    assert imported == ([] if cpu_build else ["torch"])  # never TorchRL, tensordict or transformers


def test_the_environments_metadata_imports_no_torch():
    code = (
        "import json, sys\n"
        "from torchrl_glam.envs import environment_names, get_environment\n"
        "for name in environment_names():\n"
        "    environment = get_environment(name)\n"
        "    values = {'history': 1, 'wording': 'readable'}  # an option's value other than its default\n"
        "    options = {option.name: values.get(option.name, 1) for option in environment.options if option.state}\n"
        "    environment = environment.with_options(**options)\n"
        "    environment.goal_sets, environment.goal_types, environment.state_keys, environment.has('noop_actions')\n"
        f"print('PROBE ' + json.dumps([0, sorted(m for m in {TORCH!r} if m in sys.modules)]))\n"
    )
    _, (_, imported) = probe(code)
    assert imported == []


@pytest.mark.parametrize(
    "name",
    ["cpu", "cuda", "cuda:0", "cuda:12", "mps", "xpu:1", "meta", "hip", "privateuseone:3"]
    + ["gpu", "cuda:", "cuda:-1", "CUDA", " cuda", "cuda:x", "cpu:0:1", "tpu", ""],
)
def test_the_device_names_a_config_accepts_without_torch_are_torchs(name):
    import torch

    from torchrl_glam.training.config import DEVICE_NAME

    try:
        torch.device(name)
        accepted = True
    except (RuntimeError, TypeError):
        accepted = False
    assert (DEVICE_NAME.fullmatch(name) is not None) is accepted


def test_help_lists_every_installed_environment(capsys):
    from torchrl_glam.algorithms.sac_glam.train import cli
    from torchrl_glam.envs.registry import BUILT_IN, ENTRY_POINT_GROUP
    from torchrl_glam.training import cli as command_line

    assert command_line.ENVIRONMENTS_GROUP == ENTRY_POINT_GROUP
    with pytest.raises(SystemExit):
        cli(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "installed: " + ", ".join(sorted(BUILT_IN)) in shown  # TextWorld's families too
