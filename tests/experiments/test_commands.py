"""The headline results stay reproducible by the commands their READMEs give: every training
command (``python examples/<algorithm>.py ...``) parses into a valid config through the script's
own parser, every launcher command validates with ``--dry-run``, and the configs of the committed
runs still load with the current config classes."""

import importlib.util
import json
import re
import shlex

import pytest
from page_commands import ROOT, command_lines, dry_run_launch, parse_training_command

from experiments.tools.results import config_by_path
from torchrl_glam.algorithms import SCRIPTS

HEADLINE = [
    ROOT / "experiments" / name
    for name in (
        "cpu_full",
        "cpu_figure2",
        "first_run",
        "babyai",
        "smollm2",
        "textworld",
        "hindsight_coin_collector",
        "textworld_treasure_hunter",
        "grpo_glam",
    )
]
# environment assignments first, then a training script or the launcher
TRAINING = re.compile(r"^(?:\w+=\S*\s+)*python\s+(?:examples/\w+\.py|-m\s+torchrl_glam\.launch)(?:\s|$)")


def training_commands() -> list[tuple[str, list[str]]]:
    """(README:line, argv) of each training or launcher command of the headline READMEs, with a
    loop's seed variable (``$s``) and the READMEs' seed placeholder (``seed=K``) set to 0."""
    commands = []
    for where, command in command_lines([folder / "README.md" for folder in HEADLINE]):
        if TRAINING.match(command):
            command = re.sub(r"\$\{?\w+\}?|(?<==)K\b", "0", command)
            argv = shlex.split(command)
            while "=" in argv[0]:  # TORCHRL_GLAM_CACHE=... python ...
                argv = argv[1:]
            commands.append((where, argv))
    return commands


COMMANDS = training_commands()


def test_every_headline_readme_gives_its_training_command():
    assert {where.split(":")[0] for where, _ in COMMANDS} == {
        str((folder / "README.md").relative_to(ROOT)) for folder in HEADLINE
    }


@pytest.mark.parametrize("where, argv", [pytest.param(w, a, id=f"{w} {' '.join(a[1:])[:80]}") for w, a in COMMANDS])
def test_training_command_parses_into_a_valid_config(where, argv, tmp_path):
    if argv[1] == "-m":
        assert dry_run_launch(argv[3:], tmp_path / "runs") == 0, where
    else:
        assert (ROOT / argv[1]).exists(), where
        parse_training_command(argv)


CONFIGS = sorted(path for folder in HEADLINE for path in folder.rglob("config.json"))


def test_the_headline_results_keep_their_runs_configs():
    assert {path.relative_to(ROOT).parts[1] for path in CONFIGS} >= {"cpu_full", "first_run"}


# probe scripts that register an environment of their own (``env=<name>`` in their runs' configs)
REGISTERING_PROBES = sorted(
    path for folder in HEADLINE for path in folder.glob("probes/*.py") if "def register()" in path.read_text()
)


@pytest.fixture(scope="module")
def probe_environments():
    """Registers the probes' environments, as running those probe scripts does."""
    from torchrl_glam.envs import environment_names, unregister_environment

    before = set(environment_names())
    for path in REGISTERING_PROBES:
        spec = importlib.util.spec_from_file_location(f"probe_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.register()
    yield
    for name in set(environment_names()) - before:
        unregister_environment(name)


def test_a_probe_registering_an_environment_is_found():
    assert any(path.name == "sac_glam_noops_masked.py" for path in REGISTERING_PROBES)


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in CONFIGS])
def test_committed_config_loads_with_the_current_config_classes(path, probe_environments):
    values = config_by_path(json.loads(path.read_text()))  # by field name before 0.3.0, as the results tool reads it
    errors = []
    for name, script in SCRIPTS.items():
        try:
            script.config_class().replace(values).validate()
            return
        except (ValueError, TypeError) as err:
            errors.append(f"{name}: {err}")
    pytest.fail(f"{path.relative_to(ROOT)} loads with no config class: {'; '.join(errors)}")
