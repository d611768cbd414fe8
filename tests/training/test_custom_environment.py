"""A user's own text environment, written here against the protocol only, trains with
``examples/sac_glam.py`` unchanged: registered from Python, then chosen by name (``env=...``)."""

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from torchrl.envs.utils import check_env_specs

# the toy environment, as its own package would hold it (imported by other tests from here)
from tests.packages.distributions import write_distribution
from tests.packages.line_environments import ACTIONS, CELLS, LineCatalogue, LineEnv, LineText  # noqa: F401
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs import (
    MissingCapability,
    get_environment,
    register_environment,
    unregister_environment,
)
from torchrl_glam.training.config import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sac_glam.py"


@pytest.fixture
def line_environment():
    register_environment("line", LineText)
    yield get_environment("line")
    unregister_environment("line")


def test_the_toy_environment_meets_the_specs(line_environment):
    check_env_specs(line_environment.make_env(3, seed=0, max_steps=4))


def test_a_registered_environment_trains_with_the_example_script_unchanged(line_environment, tmp_path):
    main = runpy.run_path(str(EXAMPLE))["main"]  # the script as a user runs it, after registering
    run_dir = tmp_path / "run"
    code = main(
        [
            "--preset",
            "smoke",
            "env=line",
            "goals=train",
            "eval_sets=train",
            "max_steps=6",
            "total_steps=48",
            "loggers=csv",
            "learning_starts=16",
            "update_frequency=8",
            "eval_every=48",
            "checkpoint_every=48",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ]
    )
    assert code == 0
    assert json.loads((run_dir / "config.json").read_text())["env"]["name"] == "line"
    evaluations = [json.loads(line) for line in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert evaluations[-1]["env_steps"] == 48 and "success/reach" in evaluations[-1]
    # the model it trained, which the run built: the random-init tiny T5 of the toy environment's own words
    from torchrl_glam.offline import resolve

    vocabulary = json.loads((Path(resolve("offline:tiny-t5", line_environment).path()) / "tokenizer.json").read_text())
    assert {"reach", "cell", "wait"} <= set(vocabulary["model"]["vocab"])


def test_the_toy_environment_pretrains_the_tiny_model_on_its_own_transcripts(line_environment, tmp_path):
    from transformers import AutoTokenizer

    from torchrl_glam.offline.pretraining import pretrain
    from torchrl_glam.offline.transcripts import RandomPlayTranscripts

    prompts, targets = RandomPlayTranscripts(num_envs=4, seed=0, environment=get_environment("line")).batch(16)
    assert all(p.startswith("Goal: reach cell ") for p in prompts)
    # the protocol's default target: the chosen candidate, then the partner's reports
    for target in targets:
        action, reports = target.split(" : ")
        assert action in ACTIONS and reports.startswith("reach cell ")
    out = pretrain(tmp_path / "model", steps=2, batch_size=8, environment=get_environment("line"))
    assert "wait" in AutoTokenizer.from_pretrained(out).get_vocab()  # the toy's own words


def test_features_the_toy_environment_lacks_are_refused_by_name(line_environment):
    from torchrl_glam.data.her import HindsightRelabel
    from torchrl_glam.data.noop_twins import NoOpTwins

    with pytest.raises(MissingCapability, match="'line' environment has no 'goals_in_scene'"):
        HindsightRelabel(
            negatives_per_episode=1, negatives_from="scene", goal_ids=[0, 1], environment=get_environment("line")
        )
    with pytest.raises(MissingCapability, match="no-op twins"):
        NoOpTwins(environment=get_environment("line"))


def test_the_config_names_unknown_environments_and_playground_only_fields():
    with pytest.raises(ConfigError, match="env.name='nowhere'.*register_environment"):
        make_config("smoke", {"env": "nowhere"})
    with pytest.raises(ConfigError, match="goal set of env='babyai'"):
        make_config("smoke", {"env": "babyai"})  # smoke's goals are Playground's "simplified"
    with pytest.raises(
        ConfigError,
        match="pretrained with hindsight goals .* exist only where the environment's offline recipe offers them",
    ):
        make_config("smoke_babyai", {"model": "offline:tiny-t5-hindsight"})
    with pytest.raises(ConfigError, match="num_objects"):
        make_config("smoke_babyai", {"num_objects": 4})


def test_configs_written_before_the_env_field_load_as_playground():
    values = make_config("smoke").to_dict()
    del values["env"]["name"]
    assert type(make_config("smoke")).from_dict(values).env.name == "playground"


@pytest.mark.parametrize(
    "field, value, capability",
    [
        ("autotelic", "lp", "neutral_scene_objects"),
        ("her_twins", True, "goals_in_scene"),
        ("noop_twins", True, "noop_actions"),
    ],
)
def test_features_an_environment_lacks_are_config_errors(line_environment, field, value, capability):
    with pytest.raises(ConfigError, match=f"{field}=.*env='line' has no '{capability}'"):
        make_config("smoke", {"env": "line", "goals": "train", "eval_sets": ["train"], field: value})


PACKAGES = Path(__file__).resolve().parents[1] / "packages"


def install_line_environments(site: Path) -> dict:
    """The toy environment's package as pip installs one: its module on the path and a
    ``*.dist-info`` whose entry point declares it; the environment variables of a process that
    has it installed."""
    write_distribution(site, "line-environments", {"torchrl_glam.environments": {"line": "line_environments:LineText"}})
    path = os.pathsep.join([str(site), str(PACKAGES), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def test_a_plug_in_environment_with_its_own_option_trains_through_the_example_script(tmp_path):
    """Issue 86: an environment of another package declares its option; the config types and
    checks it, ``--help`` lists it, and ``examples/sac_glam.py`` trains with it, nothing of
    torchrl_glam edited."""
    env = install_line_environments(tmp_path / "site")
    command = [sys.executable, str(EXAMPLE), "--preset", "smoke", "env=line", "goals=train", "eval_sets=train"]

    def run(*argv):
        return subprocess.run([*command, *argv], capture_output=True, text=True, env=env, timeout=600)

    helped = run("--help")
    assert helped.returncode == 0 and re.search(r"\n    start=random +where an episode starts", helped.stdout)
    refused = run("start=middle")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == (
        "error: bad config value env.options.start='middle': expected one of ('random', 'left') "
        "(an option of env='line')"
    )
    run_dir = tmp_path / "run"
    small = ["max_steps=6", "total_steps=48", "learning_starts=16", "update_frequency=8", "eval_every=48"]
    trained = run(
        *small, "checkpoint_every=48", "loggers=csv", "start=left", "--run-dir", str(run_dir), "--no-progress"
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert json.loads((run_dir / "config.json").read_text())["env"] == {
        "name": "line",
        "goals": "train",
        "goal_sampling": "uniform",
        "max_steps": 6,
        "num_envs": 8,
        "options": {"start": "left"},
    }
    assert json.loads((run_dir / "evaluations.jsonl").read_text().splitlines()[-1])["env_steps"] == 48


def test_a_plug_in_environment_s_package_declares_how_its_offline_models_are_pretrained(
    line_environment, tmp_path, monkeypatch
):
    """Issue 86 (item 2): the recipe of an environment's offline models is declared by its package
    through an entry point, as the environment is; the protocol says nothing of it."""
    from torchrl_glam.offline import recipes, resolve
    from torchrl_glam.offline.models import pretraining_recipe

    monkeypatch.setattr(recipes, "_RECIPES", {})  # read afresh from the entry points
    assert recipes.recipe_of(line_environment) == recipes.TranscriptRecipe()  # none declared: the default
    monkeypatch.setattr(recipes, "_RECIPES", {})
    recipes_of_line = {"line": "line_environments:TRANSCRIPT_RECIPE", "broken": "line_environments:CELLS"}
    write_distribution(tmp_path, "line-recipes", {"torchrl_glam.transcript_recipes": recipes_of_line})
    monkeypatch.syspath_prepend(str(PACKAGES))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert recipes.recipe_of(line_environment).max_steps == 6
    recipe = pretraining_recipe("t5", environment=line_environment)
    assert recipe["environment"] == "line" and "(train, 64 environments, 6 steps)" in recipe["data"]
    model = resolve("offline:tiny-t5-pretrained", line_environment)
    assert model.directory == "tiny-t5-pretrained-line" and model.build_command.endswith(" --env line")
    with pytest.raises(ValueError, match="offline recipe of env='broken'.*expected a mapping of the fields"):
        recipes.recipe_of("broken")


def test_the_option_reaches_the_environment_the_config_builds(line_environment):
    from torchrl_glam.training.factories import make_env

    for start, left in (("random", False), ("left", True)):
        env = make_env(make_config("smoke", {"env": "line", "goals": "train", "eval_sets": ["train"], "start": start}))
        assert bool((env.reset()["position"] == 0).all()) is left
