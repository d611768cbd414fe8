"""A user's own text environment, written here against the protocol only, trains with
``examples/sac_glam.py`` unchanged: registered from Python, then chosen by name (``env=...``)."""

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase
from torchrl.envs.utils import check_env_specs

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs import (
    MissingCapability,
    TextEnvironment,
    get_environment,
    register_environment,
    unregister_environment,
)
from torchrl_glam.training.config import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sac_glam.py"
CELLS = 5
ACTIONS = ("go left", "go right", "wait")


class LineCatalogue:
    """Goals "reach cell k" on a line of ``CELLS`` cells: one type, no sequences."""

    def __init__(self) -> None:
        self.goals = [f"reach cell {k}" for k in range(CELLS)]
        self.goal_type = np.zeros(CELLS, dtype=np.int64)
        self.parts = np.full((CELLS, 2), -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.goals)

    def id_of(self, goal: str) -> int:
        return self.goals.index(goal)

    def goal_set(self, name: str) -> np.ndarray:
        if name != "train":
            raise ValueError(f"goal set {name!r}: choose 'train'")
        return np.arange(CELLS)


class LineEnv(EnvBase):
    """A batched line walk: the agent starts at a random cell and must reach the goal's; the
    partner reports the cell it stands on after each step."""

    def __init__(self, num_envs: int, seed: int | None, max_steps: int | None) -> None:
        super().__init__(batch_size=torch.Size([num_envs]))
        self.num_envs, self.max_steps = num_envs, max_steps or 8
        self.catalogue = LineCatalogue()
        B = num_envs
        self.observation_spec = Composite(
            goal_id=Categorical(CELLS, shape=(B,), dtype=torch.int64),
            position=Categorical(CELLS, shape=(B,), dtype=torch.int64),
            action_mask=Binary(n=len(ACTIONS), shape=(B, len(ACTIONS)), dtype=torch.bool),
            achieved_goal_ids=Bounded(low=-1, high=CELLS - 1, shape=(B, 1), dtype=torch.int64),
            achieved_goal_count=Bounded(low=0, high=1, shape=(B,), dtype=torch.int64),
            shape=(B,),
        )
        self.action_spec = Categorical(len(ACTIONS), shape=(B,), dtype=torch.int64)
        self.reward_spec = Unbounded(shape=(B, 1))
        done = Categorical(2, shape=(B, 1), dtype=torch.bool)
        self.done_spec = Composite(done=done, terminated=done.clone(), truncated=done.clone(), shape=(B,))
        self.set_seed(seed)

    def _set_seed(self, seed):
        self.seed_value = seed
        self.generator = torch.Generator().manual_seed(0 if seed is None else seed)

    def _observation(self, reported: torch.Tensor) -> TensorDict:
        B = self.num_envs
        return TensorDict(
            {
                "goal_id": self.goal.clone(),
                "position": self.position.clone(),
                "action_mask": torch.ones(B, len(ACTIONS), dtype=torch.bool),
                "achieved_goal_ids": torch.where(reported, self.position, -1).unsqueeze(-1),
                "achieved_goal_count": reported.long(),
            },
            batch_size=[B],
        )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        B = self.num_envs
        reset = torch.ones(B, dtype=torch.bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            reset = tensordict["_reset"].reshape(B)
        if not hasattr(self, "goal"):
            self.goal, self.position, self.steps = (torch.zeros(B, dtype=torch.int64) for _ in range(3))
        self.goal[reset] = torch.randint(CELLS, (int(reset.sum()),), generator=self.generator)
        self.position[reset] = torch.randint(CELLS, (int(reset.sum()),), generator=self.generator)
        self.steps[reset] = 0
        out = self._observation(torch.zeros(B, dtype=torch.bool))
        zeros = torch.zeros(B, 1, dtype=torch.bool)
        out.update({"done": zeros, "terminated": zeros.clone(), "truncated": zeros.clone()})
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.position = (self.position + torch.tensor([-1, 1, 0])[tensordict["action"]]).clamp(0, CELLS - 1)
        self.steps = self.steps + 1
        out = self._observation(torch.ones(self.num_envs, dtype=torch.bool))  # its cell, at every step
        success = (self.position == self.goal).unsqueeze(-1)  # reward 1 exactly when reported
        truncated = (self.steps >= self.max_steps).unsqueeze(-1) & ~success
        out.update(
            {"reward": success.float(), "terminated": success, "truncated": truncated, "done": success | truncated}
        )
        return out


class LineText(TextEnvironment):
    name = "line"
    episode_keys = ("goal_id",)
    step_keys = ("position",)
    goal_types = ("reach",)
    goal_sets = ("train",)

    def __init__(self) -> None:
        self._catalogue = LineCatalogue()

    @property
    def catalogue(self):
        return self._catalogue

    def make_env(self, num_envs, seed=None, goals=None, max_steps=None, goal_sampling="uniform", **options):
        return LineEnv(num_envs, seed, max_steps)

    def render(self, state):
        prompts = [
            f"Goal: {self._catalogue.goals[int(g)]}\nYou are on cell {int(p)}\nAction: "
            for g, p in zip(state["goal_id"], state["position"])
        ]
        return prompts, [list(ACTIONS) for _ in prompts]

    def action_mask(self, state):
        return torch.ones(*state["position"].shape, len(ACTIONS), dtype=torch.bool)

    def vocabulary_words(self):
        return [
            "Goal",
            "reach",
            "cell",
            "You",
            "are",
            "on",
            "Action",
            "go",
            "left",
            "right",
            "wait",
            ":",
            *map(str, range(CELLS)),
        ]


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
    # the model it trained: the random-init tiny T5 of the toy environment's own words
    from torchrl_glam.offline.tiny import default_tiny_model_path

    vocabulary = json.loads((default_tiny_model_path("t5", line_environment) / "tokenizer.json").read_text())
    assert {"reach", "cell", "wait"} <= set(vocabulary["model"]["vocab"])


def test_the_toy_environment_pretrains_the_tiny_model_on_its_own_transcripts(line_environment, tmp_path):
    from transformers import AutoTokenizer

    from torchrl_glam.offline.pretraining import pretrain
    from torchrl_glam.offline.transcripts import RandomPlayTranscripts

    prompts, targets = RandomPlayTranscripts(num_envs=4, seed=0, environment="line").batch(16)
    assert all(p.startswith("Goal: reach cell ") for p in prompts)
    # the protocol's default target: the chosen candidate, then the partner's reports
    for target in targets:
        action, reports = target.split(" : ")
        assert action in ACTIONS and reports.startswith("reach cell ")
    out = pretrain(tmp_path / "model", steps=2, batch_size=8, environment="line")
    assert "wait" in AutoTokenizer.from_pretrained(out).get_vocab()  # the toy's own words


def test_features_the_toy_environment_lacks_are_refused_by_name(line_environment):
    from torchrl_glam.data.her import HindsightRelabel
    from torchrl_glam.data.noop_twins import NoOpTwins

    with pytest.raises(MissingCapability, match="'line' environment has no 'goals_in_scene'"):
        HindsightRelabel(negatives_per_episode=1, negatives_from="scene", goal_ids=[0, 1], environment="line")
    with pytest.raises(MissingCapability, match="no-op twins"):
        NoOpTwins(environment="line")


def test_the_config_names_unknown_environments_and_playground_only_fields():
    with pytest.raises(ConfigError, match="env.name='nowhere'.*register_environment"):
        make_config("smoke", {"env": "nowhere"})
    with pytest.raises(ConfigError, match="goal set of env='babyai'"):
        make_config("smoke", {"env": "babyai"})  # smoke's goals are Playground's "simplified"
    with pytest.raises(ConfigError, match="pretrained with hindsight goals exist for Playground-Text only"):
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
