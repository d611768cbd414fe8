"""Playground-Text and BabyAI-Text behind the protocol: the adapters' pure functions of the compact
state give what the environments themselves give."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.packages.distributions import write_distribution
from torchrl_glam.envs import (
    EnvironmentLoadError,
    MissingCapability,
    TextEnvironment,
    environment_names,
    get_environment,
    register_environment,
)
from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.envs.transforms import RenderState

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def _random_steps(environment, env, steps=6):
    td, out, generator = env.reset(), [], torch.Generator().manual_seed(0)
    for _ in range(steps):
        td["action"] = td["action_mask"].float().multinomial(1, generator=generator).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        out.append(step["next"])
    return out


@pytest.mark.parametrize("name", ["playground", "babyai"])
def test_render_and_mask_agree_with_the_text_environment(name):
    if name == "babyai":
        pytest.importorskip("minigrid")
    environment = get_environment(name)
    env = environment.make_env(4, seed=3, max_steps=5)
    if name == "babyai":
        from torchrl_glam.envs.babyai import BabyAITextEnv

        text_env = BabyAITextEnv(4, seed=3, text=True, max_steps=5)
    else:
        text_env = PlaygroundTextEnv(4, seed=3, max_steps=5, text=True)
    for nxt, text in zip(_random_steps(environment, env), _random_steps(environment, text_env)):
        state = {k: nxt[k] for k in environment.state_keys}
        prompts, actions = environment.render(state)
        assert prompts == list(text["prompt"]) and actions == [list(a) for a in text["actions"]]
        assert torch.equal(environment.action_mask(state), nxt["action_mask"])
        assert environment.action_mask(state).shape[-1] == environment.num_actions(env)


def test_the_playground_adapter_is_the_environment_of_the_paper():
    playground = get_environment("playground")
    assert playground.name == "playground" and set(environment_names()) >= {"playground", "babyai"}
    assert playground.state_keys == ("goal_id", "objects", "agent_on", "held", "grown")
    transform = playground.render_transform()  # the protocol's default
    assert isinstance(transform, RenderState) and transform.environment is playground
    env = playground.make_env(2, seed=0, goals="simplified")
    assert isinstance(env, PlaygroundTextEnv) and not env.text and playground.num_actions(env) == 5
    for capability in ("goals_in_scene", "noop_actions", "goal_attributes", "subgoal_matrix", "neutral_scene_objects"):
        assert playground.has(capability)


def test_babyai_lacks_the_playground_grammar_capabilities_by_name():
    pytest.importorskip("minigrid")
    babyai = get_environment("babyai")
    assert babyai.state_keys == ("goal_id", "objects", "image", "carrying") and babyai.held_out_goal_set == "test"
    assert babyai.has("noop_actions") and babyai.has("goals_in_scene") and not babyai.has("goal_attributes")
    with pytest.raises(MissingCapability, match="'babyai' environment has no 'subgoal_matrix'"):
        babyai.subgoal_matrix()
    with pytest.raises(ValueError, match="not a BabyAI-Text goal set"):
        babyai.make_env(1, goals="simplified")


def test_the_registry_refuses_duplicates_and_non_environments():
    with pytest.raises(ValueError, match="already registered"):
        register_environment("playground", TextEnvironment)
    with pytest.raises(ValueError, match="unknown environment 'nowhere'"):
        get_environment("nowhere")
    register_environment("not_an_env", object)
    try:  # one line naming it and where it comes from (a user error: no traceback on the command line)
        with pytest.raises(EnvironmentLoadError, match="'not_an_env'.*register_environment.*not a TextEnvironment"):
            get_environment("not_an_env")
    finally:
        from torchrl_glam.envs import unregister_environment

        unregister_environment("not_an_env")


def test_the_observations_of_a_mapping_of_state_keys_are_the_environments_text():
    from torchrl_glam.data.replay import GoalReplay
    from torchrl_glam.envs.playground import GoalCatalogue

    env = PlaygroundTextEnv(2, seed=0, text=True)
    td = env.reset()
    prompts, _, mask = PLAYGROUND.observations({k: td[k] for k in PLAYGROUND.state_keys})
    assert prompts == list(td["prompt"]) and torch.equal(mask, td["action_mask"])
    assert GoalReplay(capacity=4, prioritized=False, environment=PLAYGROUND).environment.name == "playground"
    # a goal catalogue where an environment goes (the catalogue= of 0.1.0) is named, not looked up
    refusal = r"expected a TextEnvironment or a registered name \(babyai, playground[^)]*\), got GoalCatalogue"
    with pytest.raises(TypeError, match=refusal):
        get_environment(GoalCatalogue.default())


def test_there_is_no_default_environment():
    # the library's pieces name their environment: nothing falls back to Playground-Text silently
    from torchrl_glam.data.episodes import EpisodeAssembler
    from torchrl_glam.data.replay import GoalReplay

    with pytest.raises(TypeError, match=r"a registered name \(babyai, playground[^)]*\), got NoneType"):
        get_environment(None)
    for build in (lambda: EpisodeAssembler(2, 10), lambda: GoalReplay(capacity=8)):
        with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'environment'"):
            build()
    babyai = get_environment("babyai")
    assert EpisodeAssembler(2, 10, environment=babyai).step_keys == babyai.state_keys + ("action",)
    # the library's objects take the environment object, resolved where a name is given
    with pytest.raises(TypeError, match=r"environment: expected a TextEnvironment: pass get_environment\('babyai'\)"):
        EpisodeAssembler(2, 10, environment="babyai")


TOY_MODULE = '''\
from torchrl_glam.envs.playground.environment import PlaygroundText


class ToyText(PlaygroundText):
    """Playground-Text under a name of its own, as a user's package would register it."""

    name = "toy"
'''


def test_a_package_registers_its_environment_through_the_entry_point_group(tmp_path, monkeypatch):
    # a distribution as pip installs one: its module, and a *.dist-info whose entry_points.txt
    # importlib.metadata reads
    (tmp_path / "toy_environments.py").write_text(TOY_MODULE)
    toys = {
        "toy": "toy_environments:ToyText",
        "mistyped": "toy_environments:TyoText",
        "twice": "toy_environments:ToyText",
    }
    write_distribution(tmp_path, "toy-environments", {"torchrl_glam.environments": toys})
    # another package claiming "twice"
    write_distribution(
        tmp_path, "other-environments", {"torchrl_glam.environments": {"twice": "other_environments:Twice"}}
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "toy" in environment_names()
        assert "toy_environments" not in sys.modules  # listed, not imported
        toy = get_environment("toy")
        assert type(toy).__module__ == "toy_environments" and toy.name == "toy"
        from torchrl_glam.algorithms.sac_glam.config import make_config
        from torchrl_glam.offline import resolve
        from torchrl_glam.offline.models import offline_name
        from torchrl_glam.training.config import ConfigError

        assert make_config("smoke", {"env": "toy"}).environment is toy
        with pytest.raises(ConfigError, match="model.name"):  # no hindsight-pretrained tiny models
            make_config("smoke", {"env": "toy", "model": "offline:tiny-t5-hindsight"})
        # an environment of its own gets its own offline models (the offline room's default recipe)
        assert offline_name("t5", "random", toy) == "tiny-t5-pretrained-toy"
        assert resolve("offline:tiny-t5-pretrained", toy).build_command.endswith(" --env toy")
        with pytest.raises(ValueError, match="already registered"):
            register_environment("toy", TextEnvironment)
        with pytest.raises(ValueError, match="'toy_environments:TyoText'.*names nothing its module has"):
            get_environment("mistyped")
        with pytest.raises(ValueError, match="'twice' is declared by several entry points"):
            get_environment("twice")
    finally:
        from torchrl_glam.envs import unregister_environment

        unregister_environment("toy")
        unregister_environment("mistyped")
        unregister_environment("twice")
        sys.modules.pop("toy_environments", None)


def test_the_built_in_environments_are_the_entry_points_pyproject_declares():
    import tomllib

    from torchrl_glam.envs.registry import BUILT_IN, BUILT_IN_RECIPES, ENTRY_POINT_GROUP, RECIPE_GROUP

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"][ENTRY_POINT_GROUP] == BUILT_IN
    assert pyproject["project"]["entry-points"][RECIPE_GROUP] == BUILT_IN_RECIPES


def test_installed_metadata_without_the_recipes_still_gives_the_built_in_ones(monkeypatch):
    """An install of 0.3.0 under a newer checkout declares no recipes: Playground-Text must keep its
    own (the shipped models' names), not silently get the default (new names, a new pretraining)."""
    from torchrl_glam.offline import recipes

    monkeypatch.setattr(recipes, "_RECIPES", {})
    monkeypatch.setattr(recipes, "entry_points", lambda group: [])  # metadata that predates the group
    playground = recipes.recipe_of(PLAYGROUND)
    assert playground.unsuffixed and playground.hindsight and playground.goal_sets == ("simplified", "train")


def test_the_registry_imports_no_environment_until_one_is_named():
    code = (
        "import sys\n"
        "from torchrl_glam.envs import environment_names, get_environment\n"
        "assert {'playground', 'babyai'} <= set(environment_names())\n"
        "print(sorted(m for m in sys.modules if m.startswith(('torchrl_glam.envs.playground', "
        "'torchrl_glam.envs.babyai'))))\n"
        "get_environment('playground')\n"
        "print('torchrl_glam.envs.playground.environment' in sys.modules, 'torchrl_glam.envs.babyai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "True False"], done.stderr
