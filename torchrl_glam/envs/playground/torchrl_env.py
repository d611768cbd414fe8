"""Playground-Text as a natively batched TorchRL environment.

One :class:`PlaygroundTextEnv` steps ``num_envs`` scenes at once (numpy rules in
:mod:`torchrl_glam.envs.playground.rules`; no process per scene). Keys, with B = ``num_envs``, N objects and
A = N+2 candidate actions:

======================== ============ ========================================================
key                      shape        meaning
======================== ============ ========================================================
"prompt"                 [B] text     the observation text of the spec
"actions"                [B] text     the A candidate action texts of each scene (a list each)
"action_mask"            [B, A] bool  False for "Go to" the held object
"goal", "goal_id"        [B]          the episode's goal, as text and as a catalogue index
"objects"                [B, N] int   compact state: object ids (``OBJECT_NAMES``) in scene order
"agent_on", "held"       [B] int      compact state: a scene slot, -1 for nothing
"grown"                  [B, N] bool  compact state: which objects have grown
"achieved_goals"         [B] text     the social partner's reports at the last step (a list each)
"achieved_goal_ids"      [B, K] int   the same as catalogue ids, padded with -1 ...
"achieved_goal_count"    [B] int      ... and how many are valid
"action"                 [B] int      input: an index into the candidates (masked Categorical)
"reward", "done", ...    [B, 1]       under "next" after a step
======================== ============ ========================================================

The compact state and ``goal_id`` re-render any prompt (:func:`~torchrl_glam.envs.playground.render.render_batch`),
so a replay buffer can hold integers only and relabel by changing ``goal_id``.

An explicit reset, per sub-environment::

    env.reset(TensorDict({"goal": ["Grow green mouse then grow blue rose", None],
                          "scene": [["green water", "green mouse", "blue rose", "red rose",
                                     "blue lion", "red food"], None]}, batch_size=[2]))

``None`` entries are sampled. With ``"_reset"`` only the flagged sub-environments are reset; a
reset tensordict that also carries ``"goal_id"`` (the last observation passed back, as in
``env.reset(td.set("_reset", mask))``) is not a request, and its ``"goal"`` is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, NonTensor, Unbounded
from torchrl.envs import EnvBase

from torchrl_glam.envs.env_state import PlainEnvState
from torchrl_glam.envs.playground.catalogue import GOAL_SETS, GoalCatalogue
from torchrl_glam.envs.playground.render import render_batch
from torchrl_glam.envs.playground.rules import PlaygroundRules, object_ids
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES

_EXAMPLE_PROMPT = (
    "Goal: Grasp red cat\nYou see: red cat\nYou are on: nothing\nYou are holding: nothing\n"
    "You have grown: nothing\nAction: "
)


def max_reports_per_step(num_objects: int) -> int:
    """An upper bound on the goals reported at one step, the width of "achieved_goal_ids".

    One object has an event per step and matches at most 7 descriptions: at most 7 singles, and
    7 sequential goals for each Grow description achieved earlier (at most 7 per other object,
    and 95 Grow goals in all).
    """
    return 7 * (1 + min(7 * (num_objects - 1), 95))


def _text(values: list, device: torch.device) -> NonTensorStack:
    """One text (or list of texts) per sub-environment, as a stack TorchRL can index and stack.
    Made on the output's device: setting it into the output then moves nothing."""
    return NonTensorStack(*[NonTensorData(data=v, device=device) for v in values], device=device)


def _per_env(value, batch_size: int, key: str) -> list:
    """The entries of a reset request ("goal" or "scene") as a list of length ``batch_size``."""
    if isinstance(value, NonTensorStack):
        value = value.tolist()
    elif isinstance(value, NonTensorData):
        value = value.data
    if isinstance(value, str) or (key == "scene" and value and isinstance(value[0], str)):
        value = [value] * batch_size  # one goal or one scene for every sub-environment
    if len(value) != batch_size:
        raise ValueError(f"reset {key!r} has {len(value)} entries for {batch_size} sub-environments")
    return list(value)


class PlaygroundTextEnv(PlainEnvState, EnvBase):
    """Playground-Text (docs/site/playground_text_spec.md), batched over ``num_envs`` scenes.

    Args:
        num_envs (int): number of sub-environments stepped together (the batch size).
        num_objects (int | None): objects per scene, N (default 6; 3 for ``goals="simplified"``).
        goals (str): the task set: "train" (8,470 goals), "simplified" (the 182 single training goals)
            or "held_out" (the 64 held-out goals).
        max_steps (int): an episode is truncated after this many steps (default 10).
        seed (int | None): seed of the scene and goal sampler; same seed, same scenes, goals and rewards.
        device (torch.device | str): where the output tensors live.
        goal_sampling (str): "uniform" over the task set (training) or "by_type": uniform over goal
            types first (evaluation).
        reported_goals (Sequence[str] | None): the goal sets the social partner reports; default: the task set, and
            for "held_out" the training goals and the held-out goals.
        text (bool): write the text keys ("prompt", "actions", "goal", "achieved_goals"). Without
            them the output holds tensors only (the compact state) and a step costs ~20x less:
            tensordict's non-tensor stacks dominate a step's time, and a training loop can render
            the text itself from the compact state with :func:`~torchrl_glam.envs.playground.render.render_batch`.
        catalogue (GoalCatalogue | None): the goal grammar (shared default when omitted).

    Examples:
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0)
        >>> td = env.reset()
        >>> td["goal"][0]
        'Grow blue lion'
        >>> print("\\n".join(td["prompt"][0].splitlines()[:3]))
        Goal: Grow blue lion
        You see: red cactus, blue lion, blue water
        You are on: nothing
        >>> td["actions"][0]  # "Go to" each of the 3 objects, "Grasp", "Release"
        ['Go to red cactus', 'Go to blue lion', 'Go to blue water', 'Grasp', 'Release']
        >>> td["action_mask"].shape, td["objects"].shape
        (torch.Size([2, 5]), torch.Size([2, 3]))
        >>> td["action"] = td["action_mask"].int().argmax(-1)  # the first legal candidate
        >>> td = env.step(td)
        >>> td["next", "reward"].shape, td["next", "done"].dtype
        (torch.Size([2, 1]), torch.bool)
    """

    batch_locked = True

    def __init__(
        self,
        num_envs: int = 1,
        num_objects: int | None = None,
        goals: str = "train",
        max_steps: int = 10,
        seed: int | None = None,
        device: torch.device | str = "cpu",
        goal_sampling: str = "uniform",
        reported_goals: Sequence[str] | None = None,
        text: bool = True,
        catalogue: GoalCatalogue | None = None,
    ) -> None:
        if goals not in GOAL_SETS:
            raise ValueError(f"goals={goals!r} is not a goal set; choose one of {GOAL_SETS}")
        if goal_sampling not in ("uniform", "by_type"):
            raise ValueError(f"goal_sampling={goal_sampling!r}; choose 'uniform' or 'by_type'")
        if num_objects is None:
            num_objects = 3 if goals == "simplified" else 6
        if not 2 <= num_objects <= len(OBJECT_NAMES):
            raise ValueError(f"num_objects={num_objects} must be between 2 and {len(OBJECT_NAMES)}")
        if num_envs < 1 or max_steps < 1:
            raise ValueError(f"num_envs={num_envs} and max_steps={max_steps} must be at least 1")
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        self.catalogue = catalogue or GoalCatalogue.default()
        if reported_goals is None:
            reported_goals = ("train", "held_out") if goals == "held_out" else (goals,)
        reported = np.concatenate([self.catalogue.goal_set(name) for name in reported_goals])
        self.goals, self.goal_sampling, self.text = goals, goal_sampling, text
        self.num_envs, self.num_objects, self.max_steps = num_envs, num_objects, max_steps
        self.max_reports = max_reports_per_step(num_objects)
        self.rules = PlaygroundRules(
            num_envs, num_objects, self.catalogue.goal_set(goals), reported, max_steps, self.catalogue
        )
        self._achieved = [[] for _ in range(num_envs)]
        self._make_specs()
        self.set_seed(seed)

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        B, N, A, K = self.num_envs, self.num_objects, self.num_objects + 2, self.max_reports
        int_slot = dict(low=-1, high=N - 1, dtype=torch.int64, device=self.device)
        self.observation_spec = Composite(
            action_mask=Binary(n=A, shape=(B, A), dtype=torch.bool, device=self.device),
            goal_id=Categorical(len(self.catalogue), shape=(B,), dtype=torch.int64, device=self.device),
            objects=Categorical(len(OBJECT_NAMES), shape=(B, N), dtype=torch.int64, device=self.device),
            agent_on=Bounded(shape=(B,), **int_slot),
            held=Bounded(shape=(B,), **int_slot),
            grown=Binary(n=N, shape=(B, N), dtype=torch.bool, device=self.device),
            achieved_goal_ids=Bounded(
                low=-1, high=len(self.catalogue) - 1, shape=(B, K), dtype=torch.int64, device=self.device
            ),
            achieved_goal_count=Bounded(low=0, high=K, shape=(B,), dtype=torch.int64, device=self.device),
            shape=(B,),
            device=self.device,
        )
        if self.text:
            examples = {
                "prompt": _EXAMPLE_PROMPT,
                "actions": ["Grasp", "Release"],
                "goal": "Grasp red cat",
                "achieved_goals": [],
            }
            for key, example in examples.items():
                self.observation_spec[key] = NonTensor(shape=(B,), example_data=example, device=self.device)
        self.action_spec = Categorical(A, shape=(B,), dtype=torch.int64, device=self.device, mask=None)
        self.reward_spec = Unbounded(shape=(B, 1), dtype=torch.float32, device=self.device)
        done = Categorical(2, shape=(B, 1), dtype=torch.bool, device=self.device)
        self.done_spec = Composite(
            done=done, terminated=done.clone(), truncated=done.clone(), shape=(B,), device=self.device
        )

    # ------------------------------------------------------------------ EnvBase API
    def _set_seed(self, seed: int | None) -> None:
        self.seed_value = seed  # the last seed given (None: fresh entropy)
        self.rng = np.random.default_rng(seed)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        B, rules = self.num_envs, self.rules
        reset = np.ones(B, dtype=bool)
        goals, scenes = [None] * B, [None] * B
        if tensordict is not None:
            if "_reset" in tensordict.keys():
                reset = tensordict.get("_reset").reshape(B).cpu().numpy()
            # a tensordict that carries "goal_id" is an observation passed back with "_reset"
            # (TorchRL's partial-reset idiom): its "goal" is the old goal, not a request
            request = "goal_id" not in tensordict.keys()
            if request and "goal" in tensordict.keys():
                goals = _per_env(tensordict.get("goal"), B, "goal")
            if request and "scene" in tensordict.keys():
                scenes = _per_env(tensordict.get("scene"), B, "scene")
        by_type = self.goal_sampling == "by_type"
        # validate every request before changing any state
        goal_ids = [
            (self.catalogue.id_of(goals[b]) if goals[b] is not None else None) if reset[b] else None for b in range(B)
        ]
        scene_ids = [object_ids(list(scenes[b])) if reset[b] and scenes[b] is not None else None for b in range(B)]
        for b in np.flatnonzero(reset):
            if goal_ids[b] is not None and scene_ids[b] is None:
                rules.check_goal_fits(goal_ids[b])
            if scene_ids[b] is not None and len(scene_ids[b]) != self.num_objects:
                raise ValueError(
                    f"reset scene of sub-environment {b} has {len(scene_ids[b])} objects "
                    f"{list(scenes[b])}; this environment has num_objects={self.num_objects}"
                )
        for b in np.flatnonzero(reset):
            goal_id = goal_ids[b] if goal_ids[b] is not None else rules.sample_goal(self.rng, by_type)
            scene = scene_ids[b] if scene_ids[b] is not None else rules.sample_scene(goal_id, self.rng)
            rules.reset(b, goal_id, scene)
            self._achieved[b] = []
        out = self._observation()
        zeros = torch.zeros(B, 1, dtype=torch.bool, device=self.device)
        out.update({"done": zeros, "terminated": zeros.clone(), "truncated": zeros.clone()})
        return out

    def restart_as(self, b: int, source: int) -> None:
        """Restarts sub-environment ``b`` in sub-environment ``source``'s scene with its goal, as its
        episode started (on nothing, holding nothing): a group of episodes from one start."""
        self.rules.reset(b, int(self.rules.goal_id[source]), list(self.rules.objects[source]))
        self._achieved[b] = []

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        if action.numel() == self.num_envs:  # [B] or [B, 1]
            action = action.reshape(self.num_envs)
        integer = not (action.dtype.is_floating_point or action.dtype.is_complex or action.dtype == torch.bool)
        if action.shape != (self.num_envs,) or not integer:
            raise ValueError(
                f"'action' must be {self.num_envs} integer indices (shape [{self.num_envs}]), got "
                f"{tuple(action.shape)} {action.dtype}"
            )
        result = self.rules.step(action.cpu().numpy())
        self._achieved = result.achieved
        out = self._observation()
        out.set("reward", torch.as_tensor(result.reward, device=self.device).unsqueeze(-1))
        terminated = torch.as_tensor(result.terminated, device=self.device).unsqueeze(-1)
        truncated = torch.as_tensor(result.truncated, device=self.device).unsqueeze(-1)
        out.update({"terminated": terminated, "truncated": truncated, "done": terminated | truncated})
        return out

    _ENV_STATE = ("rules", "rng", "seed", "achieved")

    def _env_state(self) -> dict:
        """Scenes, social partner memory and the sampler's generator: a checkpoint resumes exactly."""
        return {
            "rules": self.rules.state_dict(),
            "rng": self.rng.bit_generator.state,
            "seed": self.seed_value,
            "achieved": [list(a) for a in self._achieved],
        }

    def _load_env_state(self, state: dict) -> None:
        self.rules.load_state_dict(state["rules"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self.seed_value = state["seed"]
        self._achieved = [list(a) for a in state["achieved"]]

    # ------------------------------------------------------------------ output
    def _observation(self) -> TensorDict:
        rules, B = self.rules, self.num_envs
        mask = rules.action_mask()
        ids = np.full((B, self.max_reports), -1, dtype=np.int64)
        for b, achieved in enumerate(self._achieved):
            ids[b, : len(achieved)] = achieved
        out = TensorDict(
            {
                "action_mask": torch.from_numpy(mask),
                "goal_id": torch.from_numpy(rules.goal_id.copy()),
                "objects": torch.from_numpy(rules.objects.copy()),
                "agent_on": torch.from_numpy(rules.agent_on.copy()),
                "held": torch.from_numpy(rules.held.copy()),
                "grown": torch.from_numpy(rules.grown.copy()),
                "achieved_goal_ids": torch.from_numpy(ids),
                "achieved_goal_count": torch.tensor([len(a) for a in self._achieved]),
            },
            batch_size=self.batch_size,
            device=self.device,
        )
        if self.text:
            goals = self.catalogue.goals
            prompts, actions = render_batch(
                rules.goal_id, rules.objects, rules.agent_on, rules.held, rules.grown, self.catalogue
            )
            out.set("prompt", _text(prompts, self.device))
            out.set("actions", _text(actions, self.device))
            out.set("goal", _text([goals[g] for g in rules.goal_id], self.device))
            out.set("achieved_goals", _text([[goals[g] for g in a] for a in self._achieved], self.device))
        self.action_spec.update_mask(out["action_mask"])
        return out
