"""Plug-in environments that are broken fail in one line, before the run folder is touched: the line
names the environment, its entry point (``module:attr``) and the package that declares it, what
went wrong and the fix (1: a module or factory that fails; 2: specs or declared sizes that
disagree, checked before the run dir is prepared; 3: an environment uninstalled since the run, on
``--resume``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from reliability_helpers import PYTHON, ROOT, subprocess_env
from torchrl.data import Binary

from tests.packages.distributions import write_distribution

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from test_custom_environment import ACTIONS, LineEnv, LineText  # noqa: E402  the protocol's toy line walk

from torchrl_glam.algorithms.sac_glam.config import make_config  # noqa: E402
from torchrl_glam.envs import register_environment, unregister_environment  # noqa: E402

DIST, VERSION = "broken-envs", "1.2"


def _load_error():  # imported where used: the code before the fix had no such class
    from torchrl_glam.envs import EnvironmentLoadError

    return EnvironmentLoadError


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Installs a distribution on ``sys.path`` as pip would (its modules and a ``*.dist-info`` with
    ``entry_points.txt``, as tests/envs/test_environment_protocol.py does):
    ``plugin({"module": source}, {"env_name": "module:attr"})``; unregistered afterwards."""
    names, modules = [], []

    def install(sources: dict[str, str], entry_points: dict[str, str]) -> Path:
        for module, source in sources.items():
            (tmp_path / f"{module}.py").write_text(source)
            modules.append(module)
        write_distribution(tmp_path, DIST, {"torchrl_glam.environments": entry_points}, VERSION)
        names.extend(entry_points)
        monkeypatch.syspath_prepend(str(tmp_path))
        return tmp_path

    yield install
    for name in names:
        unregister_environment(name)
    for module in modules:
        sys.modules.pop(module, None)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def _train(example, run: Path, env: str, *more: str) -> int:
    return example.cli(
        ["--preset", "smoke", f"env={env}", "goals=train", "eval_sets=train", "max_steps=6", "total_steps=48"]
        + ["loggers=csv", "learning_starts=16", "update_frequency=8", "eval_every=48", "checkpoint_every=48"]
        + ["--run-dir", str(run), "--no-progress", *more]
    )


# ---- 1. a module or factory that fails: one line naming the environment, entry point and package

#: kind -> (the plug-in module's source, what the line says of the error, what it says to do)
BROKEN_PLUGINS = {
    "raises_on_import": (
        "raise RuntimeError('MY_ENVS_HOME is not set')\n\ndef make():\n    pass\n",
        "RuntimeError: MY_ENVS_HOME is not set",
        f"pip uninstall {DIST}",
    ),
    "syntax_error": ("def make(:\n    pass\n", "SyntaxError", f"pip uninstall {DIST}"),
    "missing_dependency": (
        "import not_installed_dependency_xyz\n\ndef make():\n    pass\n",
        "not_installed_dependency_xyz",
        "pip install",
    ),
    "factory_raises": (
        "def make():\n    raise ValueError('no game files in ~/.cache/my_envs')\n",
        "ValueError: no game files in ~/.cache/my_envs",
        f"pip uninstall {DIST}",
    ),
    "factory_returns_a_dict": (
        "def make():\n    return {'not': 'an environment'}\n",
        "dict, not a TextEnvironment",
        f"pip uninstall {DIST}",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_PLUGINS))
def test_a_broken_plugin_is_refused_in_one_line_naming_its_entry_point_and_package(
    kind, plugin, tmp_path, capsys, sac_example
):
    source, error, fix = BROKEN_PLUGINS[kind]
    name, module = f"broken_{kind}", f"broken_plugin_{kind}"
    plugin({module: source}, {name: f"{module}:make"})
    run = tmp_path / "run"
    assert _train(sac_example, run, name) == 2
    line = _one_line(capsys)
    for says in (f"'{name}'", f"{module}:make", f"{DIST} {VERSION}", error, fix):
        assert says in line, (says, line)
    assert not run.exists()


@pytest.mark.parametrize("kind", ["raises_on_import", "factory_returns_a_dict"])
def test_the_registry_raises_the_dedicated_class_with_its_cause(kind, plugin):
    name, module = f"direct_{kind}", f"direct_plugin_{kind}"
    plugin({module: BROKEN_PLUGINS[kind][0]}, {name: f"{module}:make"})
    from torchrl_glam.envs import get_environment

    with pytest.raises(_load_error(), match=rf"'{name}'.*{module}:make.*{DIST} {VERSION}"):
        get_environment(name)
    assert issubclass(_load_error(), ValueError)  # what the config's validation turns into a ConfigError


def test_a_registered_factory_that_raises_is_named_as_registered(tmp_path, capsys, sac_example):
    def make_flaky():
        raise RuntimeError("the simulator is not running")

    register_environment("flaky_registered", make_flaky)
    try:
        assert _train(sac_example, tmp_path / "run", "flaky_registered") == 2
    finally:
        unregister_environment("flaky_registered")
    line = _one_line(capsys)
    for says in ("'flaky_registered'", "register_environment", "make_flaky", "RuntimeError: the simulator"):
        assert says in line, (says, line)


def test_a_broken_plugin_exits_2_with_one_line_on_the_command_line(plugin, tmp_path):
    folder = plugin({"crashing_plugin": BROKEN_PLUGINS["raises_on_import"][0]}, {"crashing": "crashing_plugin:make"})
    run = tmp_path / "run"
    done = subprocess.run(
        [PYTHON, "examples/sac_glam.py", "--preset", "smoke", "env=crashing", "--run-dir", str(run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(PYTHONPATH=f"{folder}:{ROOT}"),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(says in lines[0] for says in ("'crashing'", "crashing_plugin:make", f"{DIST} {VERSION}")), lines
    assert not run.exists()


# ---- 2. specs or declared sizes that disagree: refused before the run dir is touched


class WideMaskEnv(LineEnv):
    """Declares a mask of one more action than its action spec and what it returns."""

    def __init__(self, num_envs, seed, max_steps):
        super().__init__(num_envs, seed, max_steps)
        width = len(ACTIONS) + 1
        self.observation_spec["action_mask"] = Binary(n=width, shape=(num_envs, width), dtype=torch.bool)


class FloatPositionEnv(LineEnv):
    """Returns its position as floats where its spec declares integers."""

    def _observation(self, reported):
        out = super()._observation(reported)
        out["position"] = out["position"].float()
        return out


def _line_text(name, env_class=LineEnv, **members):
    def make_env(self, num_envs, seed=None, goals=None, max_steps=None, goal_sampling="uniform", **options):
        return env_class(num_envs, seed, max_steps)

    return type(f"Probe_{name}", (LineText,), {"name": name, "make_env": make_env, **members})


SPEC_PROBES = {
    "mask_wider_than_the_actions": (_line_text("probe_wide_mask", WideMaskEnv), "check_env_specs"),
    "observation_off_its_spec": (_line_text("probe_float_position", FloatPositionEnv), "check_env_specs"),
    "num_actions_miscounted": (
        _line_text("probe_miscounted", num_actions=lambda self, env: len(ACTIONS) + 1),
        f"num_actions(env) is {len(ACTIONS) + 1}",
    ),
    "state_key_not_output": (_line_text("probe_undeclared", step_keys=("position", "velocity")), "'velocity'"),
}


@pytest.mark.parametrize("probe", sorted(SPEC_PROBES))
def test_an_inconsistent_environment_is_refused_before_the_run_dir_is_touched(probe, tmp_path, capsys, sac_example):
    environment, says = SPEC_PROBES[probe]
    register_environment(environment.name, environment)
    run = tmp_path / "run"
    run.mkdir()  # an empty folder stays empty: no lock, no marker, no config.json, no logs
    try:
        assert _train(sac_example, run, environment.name) == 2
    finally:
        unregister_environment(environment.name)
    line = _one_line(capsys)
    for text in (f"'{environment.name}'", "register_environment", says, "a bug in the environment"):
        assert text in line, (text, line)
    assert sorted(run.iterdir()) == []


PLUGIN_WITH_A_MISCOUNT = """\
from test_custom_environment import ACTIONS, LineText


class Miscounted(LineText):
    name = "packaged_miscount"

    def num_actions(self, env):
        return len(ACTIONS) + 1
"""


def test_an_inconsistent_plugin_names_its_package(plugin, tmp_path, capsys, sac_example):
    plugin({"miscounted_plugin": PLUGIN_WITH_A_MISCOUNT}, {"packaged_miscount": "miscounted_plugin:Miscounted"})
    run = tmp_path / "run"
    assert _train(sac_example, run, "packaged_miscount") == 2
    line = _one_line(capsys)
    for says in ("'packaged_miscount'", "miscounted_plugin:Miscounted", f"{DIST} {VERSION}", "a bug in the"):
        assert says in line, (says, line)
    assert not run.exists()


@pytest.mark.parametrize("preset", ["smoke", "smoke_babyai"])
def test_the_built_in_environments_pass_the_check(preset):
    if preset == "smoke_babyai":
        pytest.importorskip("minigrid")
    from torchrl_glam.training.factories import check_env

    state = torch.random.get_rng_state()
    check_env(make_config(preset))  # raises on a broken environment
    assert torch.equal(torch.random.get_rng_state(), state)  # its random rollout leaves the seeding alone


# ---- 3. an environment uninstalled since the run: the resume names it


def _saved_run(run: Path, env: str) -> None:
    values = make_config("smoke", {"run_dir": str(run)}).to_dict()
    values["env"]["name"] = env
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(values))


def test_a_resume_of_a_run_whose_environment_is_gone_names_it(tmp_path, capsys, sac_example):
    run = tmp_path / "run"
    _saved_run(run, "myplay")
    assert sac_example.cli(["--run-dir", str(run), "--resume", "--no-progress"]) == 2
    line = _one_line(capsys)
    for says in ("'myplay'", "not installed", "playground", "install the package", "--resume"):
        assert says in line, (says, line)
    assert "drop those overrides" not in line
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_a_resume_of_a_run_whose_plugin_is_broken_names_the_failure(plugin, tmp_path, capsys, sac_example):
    plugin({"gone_broken_plugin": BROKEN_PLUGINS["raises_on_import"][0]}, {"gone_broken": "gone_broken_plugin:make"})
    run = tmp_path / "run"
    _saved_run(run, "gone_broken")
    assert sac_example.cli(["--run-dir", str(run), "--resume", "--no-progress"]) == 2
    line = _one_line(capsys)
    for says in ("'gone_broken'", "gone_broken_plugin:make", "MY_ENVS_HOME is not set"):
        assert says in line, (says, line)
    assert "drop those overrides" not in line


def test_the_launchers_dry_run_names_the_missing_environment(tmp_path, capsys):
    from torchrl_glam.launch.launcher import cli as launch

    _saved_run(tmp_path / "smoke" / "seed0", "myplay")
    assert launch(["--preset", "smoke", "--dry-run", "--runs-root", str(tmp_path)]) == 2
    line = _one_line(capsys)
    assert "'myplay'" in line and "not installed" in line, line
