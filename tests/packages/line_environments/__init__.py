"""A text environment of its own package, written against the protocol only: a walk on a line of
cells to the goal's cell, with the partner reporting the cell the agent stands on. Its option
``start`` (declared in :attr:`LineText.options`) is where episodes start. The tests install it as a
package would be (tests/training/test_custom_environment.py writes its entry point) and register it
from Python; nothing of torchrl_glam knows it."""

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from torchrl_glam.envs import EnvOption, TextEnvironment

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

    def __init__(self, num_envs: int, seed: int | None, max_steps: int | None, start: str = "random") -> None:
        super().__init__(batch_size=torch.Size([num_envs]))
        self.num_envs, self.max_steps, self.start = num_envs, max_steps or 8, start
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
        if self.start == "left":
            self.position[reset] = 0
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


#: How its offline tiny models are pretrained, declared in the entry-point group
#: "torchrl_glam.transcript_recipes" where a test installs the package so
TRANSCRIPT_RECIPE = {"max_steps": 6}


class LineText(TextEnvironment):
    name = "line"
    episode_keys = ("goal_id",)
    step_keys = ("position",)
    goal_types = ("reach",)
    goal_sets = ("train",)
    options = (EnvOption("start", str, "random", "where an episode starts", choices=("random", "left")),)

    def __init__(self) -> None:
        self._catalogue = LineCatalogue()

    @property
    def catalogue(self):
        return self._catalogue

    def make_env(self, num_envs, seed=None, goals=None, max_steps=None, goal_sampling="uniform", start="random"):
        return LineEnv(num_envs, seed, max_steps, start)

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
