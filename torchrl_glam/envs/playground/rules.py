"""The rules of Playground-Text on a batch of scenes: scene sampling, steps, the social partner.

This is plain numpy, no TorchRL (torch loads only for the tensors of :func:`action_mask_from_held` and
of checkpoints): :class:`~torchrl_glam.envs.playground.torchrl_env.PlaygroundTextEnv` wraps it. The state
of sub-environment ``b`` is a handful of integers (its compact state, enough to re-render a prompt):

* ``objects[b]``: the object ids of the scene (indices into ``OBJECT_NAMES``), in scene order;
* ``agent_on[b]``, ``held[b]``: a scene slot, or -1 for nothing;
* ``grown[b]``: one flag per slot;
* ``goal_id[b]``: the episode's goal (hindsight relabeling changes only this).

Reward and reports come from one function, :meth:`PlaygroundRules._social_partner`, so they agree
by construction: the reward of goal g is 1 exactly when g is among the goals achieved at that step
(spec: "Social partner and reward").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from torchrl_glam.envs.playground.catalogue import GoalCatalogue, nearest
from torchrl_glam.envs.playground.vocabulary import ANIMALS, CATEGORIES, COLOURS, OBJECT_NAMES, OBJECT_TYPES, PLANTS

if TYPE_CHECKING:
    import torch

#: The compact state of an observation, in ``render_batch``'s order. ``goal_id`` and ``objects``
#: do not change within an episode: a transition keeps them once, at its root.
STATE_KEYS = ("goal_id", "objects", "agent_on", "held", "grown")
#: The keys that change from step to step (also under "next" in a transition).
STEP_STATE_KEYS = ("agent_on", "held", "grown")
NOTHING = -1
_OBJECT_ID = {name: i for i, name in enumerate(OBJECT_NAMES)}
_TYPE_OF_OBJECT = np.array([OBJECT_TYPES.index(n.split(" ")[1]) for n in OBJECT_NAMES])
_IS_ANIMAL = np.array([n.split(" ")[1] in ANIMALS for n in OBJECT_NAMES])
_IS_PLANT = np.array([n.split(" ")[1] in PLANTS for n in OBJECT_NAMES])
_IS_WATER = np.array([n.split(" ")[1] == "water" for n in OBJECT_NAMES])
_IS_FOOD = np.array([n.split(" ")[1] == "food" for n in OBJECT_NAMES])


def object_ids(scene: list[str]) -> list[int]:
    """Object ids of a list of object names; a ``ValueError`` names unknown or repeated names."""
    for name in scene:
        if name not in _OBJECT_ID:
            raise ValueError(
                f"unknown object {name!r}: objects are '<colour> <type>' with colour in "
                f"{COLOURS}. Nearest valid objects: {nearest(name, OBJECT_NAMES)}"
            )
    repeated = sorted({n for n in scene if scene.count(n) > 1})
    if repeated:
        raise ValueError(f"duplicate objects {repeated} in scene {scene}: object names must be distinct")
    return [_OBJECT_ID[n] for n in scene]


def feeds(supply: np.ndarray, living: np.ndarray) -> np.ndarray:
    """Whether object ids ``supply`` grow object ids ``living``: water grows plants and animals,
    food grows animals only."""
    return (_IS_WATER[supply] & (_IS_PLANT[living] | _IS_ANIMAL[living])) | (_IS_FOOD[supply] & _IS_ANIMAL[living])


def action_mask_from_held(held: torch.Tensor, num_actions: int) -> torch.Tensor:
    """The action mask of compact states (torch): every action is legal but "Go to" the held
    object, as :meth:`PlaygroundRules.action_mask` (for consumers that hold only the state)."""
    import torch

    mask = torch.ones(*held.shape, num_actions, dtype=torch.bool, device=held.device)
    holding = held >= 0
    mask[holding, held[holding]] = False
    return mask


@dataclass
class StepResult:
    """What one batched step returns besides the new state."""

    reward: np.ndarray  # float32 [B]
    terminated: np.ndarray  # bool [B]
    truncated: np.ndarray  # bool [B]
    achieved: list[list[int]]  # per sub-environment, the goal ids reported at this step


class PlaygroundRules:
    """The state and the rules of ``batch_size`` Playground-Text scenes of ``num_objects`` objects.

    Args:
        batch_size (int): number of sub-environments.
        num_objects (int): objects per scene (N); the candidate actions are N+2.
        goal_ids (np.ndarray): the task set goals are sampled from.
        reported_ids (np.ndarray): the goals the social partner reports (reward does not depend on it).
        max_steps (int): episodes are truncated after this many steps.
        catalogue (GoalCatalogue | None): the goal grammar (the shared default when omitted).
    """

    def __init__(
        self,
        batch_size: int,
        num_objects: int,
        goal_ids: np.ndarray,
        reported_ids: np.ndarray,
        max_steps: int,
        catalogue: GoalCatalogue | None = None,
    ) -> None:
        self.catalogue = catalogue or GoalCatalogue.default()
        self.batch_size, self.num_objects, self.max_steps = batch_size, num_objects, max_steps
        self.goal_ids = np.asarray(goal_ids, dtype=np.int64)
        self.reportable = np.zeros(len(self.catalogue), dtype=bool)
        self.reportable[reported_ids] = True
        self._goals_by_type = [self.goal_ids[self.catalogue.goal_type[self.goal_ids] == k] for k in range(4)]
        self._goals_by_type = [g for g in self._goals_by_type if len(g)]
        self.check_goal_fits(int(self.goal_ids[np.argmax(self.catalogue.required_objects[self.goal_ids])]))

        B, N = batch_size, num_objects
        self.objects = np.zeros((B, N), dtype=np.int64)
        self.agent_on = np.full(B, NOTHING, dtype=np.int64)
        self.held = np.full(B, NOTHING, dtype=np.int64)
        self.grown = np.zeros((B, N), dtype=bool)
        self.goal_id = np.zeros(B, dtype=np.int64)
        self.steps = np.zeros(B, dtype=np.int64)
        # social partner memory, per sub-environment: single goals achieved so far (id -> step),
        # and the sequential goals already reported (each is reported at most once per episode)
        self._singles_done: list[dict[int, int]] = [{} for _ in range(B)]
        self._sequential_done: list[set[int]] = [set() for _ in range(B)]

    # ------------------------------------------------------------------ reset
    def check_goal_fits(self, goal_id: int) -> None:
        need = int(self.catalogue.required_objects[goal_id])
        if need > self.num_objects:
            raise ValueError(
                f"goal {self.catalogue.goals[goal_id]!r} needs {need} objects but scenes hold "
                f"num_objects={self.num_objects}: raise num_objects (sequential goals need 4)"
            )

    def sample_goal(self, rng: np.random.Generator, by_type: bool = False) -> int:
        """A goal of the task set: uniform, or uniform over goal types first (``by_type``)."""
        pool = self._goals_by_type[rng.integers(len(self._goals_by_type))] if by_type else self.goal_ids
        return int(pool[rng.integers(len(pool))])

    def sample_scene(self, goal_id: int, rng: np.random.Generator) -> list[int]:
        """Object ids of a scene for a goal (spec: "Scene (reset)")."""
        cat = self.catalogue
        scene: list[int] = []

        def add(candidates: list[str]) -> None:
            # names are distinct: draw among the candidates not yet in the scene; when all are,
            # one already there matches the part, so nothing needs adding.
            free = [c for c in candidates if _OBJECT_ID[c] not in scene]
            if free:
                scene.append(_OBJECT_ID[free[rng.integers(len(free))]])

        for part in cat.parts[goal_id]:
            if part < 0:
                continue
            verb, description = cat.single_part_descriptions[part]
            grow = verb == "Grow"
            add(cat.matching_objects(description, growable_only=grow))
            if grow:
                target = OBJECT_NAMES[scene[-1]].split(" ")[1]
                noun = description.split(" ")[-1]
                if target in PLANTS or noun in ("plant", "living_thing"):
                    supply = "water"
                else:
                    supply = ("food", "water")[rng.integers(2)]
                add([f"{c} {supply}" for c in COLOURS])
        categories = list(CATEGORIES)
        while len(scene) < self.num_objects:
            category = categories[rng.integers(len(categories))]
            if category == "living_thing":
                category = ("animal", "plant")[rng.integers(2)]
            types = CATEGORIES[category]
            name = f"{COLOURS[rng.integers(3)]} {types[rng.integers(len(types))]}"
            if _OBJECT_ID[name] not in scene:
                scene.append(_OBJECT_ID[name])
        rng.shuffle(scene)
        return scene

    def reset(self, b: int, goal_id: int, scene: list[int]) -> None:
        """Starts a new episode in sub-environment ``b``: on nothing, holding nothing, nothing grown."""
        if len(scene) != self.num_objects:
            raise ValueError(
                f"scene {[OBJECT_NAMES[i] for i in scene]} has {len(scene)} objects; this "
                f"environment has num_objects={self.num_objects}"
            )
        self.objects[b] = scene
        self.agent_on[b] = NOTHING
        self.held[b] = NOTHING
        self.grown[b] = False
        self.goal_id[b] = goal_id
        self.steps[b] = 0
        self._singles_done[b] = {}
        self._sequential_done[b] = set()

    _STATE = ("objects", "agent_on", "held", "grown", "goal_id", "steps", "_singles_done", "_sequential_done")

    def state_dict(self) -> dict:
        """The full state of every scene, social partner memory included (for checkpoints).
        Arrays are saved as tensors: a checkpoint then loads with ``torch.load(weights_only=True)``."""
        import copy

        import torch

        return {
            name: torch.from_numpy(value.copy()) if isinstance(value, np.ndarray) else copy.deepcopy(value)
            for name, value in ((name, getattr(self, name)) for name in self._STATE)
        }

    def load_state_dict(self, state: dict) -> None:
        import copy

        import torch

        if tuple(state["objects"].shape) != self.objects.shape:
            raise ValueError(
                f"saved scenes have shape {tuple(state['objects'].shape)}, this environment {self.objects.shape}"
            )
        for name in self._STATE:
            value = state[name]
            if isinstance(value, torch.Tensor):
                value = value.numpy().astype(getattr(self, name).dtype, copy=True)
            elif isinstance(value, np.ndarray):
                value = value.copy()
            else:
                value = copy.deepcopy(value)
            setattr(self, name, value)

    # ------------------------------------------------------------------ step
    def action_mask(self) -> np.ndarray:
        """bool [B, N+2]: every action is legal but "Go to" the held object."""
        mask = np.ones((self.batch_size, self.num_objects + 2), dtype=bool)
        holding = np.flatnonzero(self.held >= 0)
        mask[holding, self.held[holding]] = False
        return mask

    def check_actions(self, actions: np.ndarray) -> None:
        N = self.num_objects
        bad = np.flatnonzero((actions < 0) | (actions >= N + 2))
        if len(bad):
            b = bad[0]
            raise ValueError(
                f"action {actions[b]} of sub-environment {b} is out of range: actions index the "
                f"{N + 2} candidates (0..{N - 1}: 'Go to <object>', {N}: 'Grasp', {N + 1}: 'Release')"
            )
        masked = np.flatnonzero(actions == np.where(self.held >= 0, self.held, -2))
        if len(masked):
            b = masked[0]
            name = OBJECT_NAMES[self.objects[b, actions[b]]]
            raise ValueError(
                f"action {actions[b]} ('Go to {name}') of sub-environment {b} is masked: the agent "
                f"holds {name}. Sample actions with the 'action_mask' (e.g. MaskedCategorical). Random "
                "actions of a wrapped or batched environment (TransformedEnv, SerialEnv, ParallelEnv: "
                "their action spec is a copy that does not follow the mask) need TorchRL's ActionMask "
                "transform last: TransformedEnv(env, ActionMask())"
            )

    def step(self, actions: np.ndarray) -> StepResult:
        """Applies one action per sub-environment (spec: "Actions")."""
        actions = np.asarray(actions, dtype=np.int64)
        self.check_actions(actions)
        N, rows = self.num_objects, np.arange(self.batch_size)
        go_to, grasp, release = actions < N, actions == N, actions == N + 1
        holding = self.held >= 0

        # contacts: the held object with the object gone to, a released object with the one under it
        contact_a = np.where(holding & (go_to | (release & (self.agent_on >= 0))), self.held, NOTHING)
        contact_b = np.where(go_to, actions, self.agent_on)

        picked = grasp & ~holding & (self.agent_on >= 0)
        event_kind = np.where(picked, 1, 0)  # 1: grasp, 2: grow
        event_slot = np.where(picked, self.agent_on, NOTHING)

        # moves
        self.held = np.where(picked, self.agent_on, self.held)
        self.agent_on = np.where(picked, NOTHING, self.agent_on)
        self.agent_on = np.where(go_to, actions, self.agent_on)
        dropped = release & holding
        self.agent_on = np.where(dropped, self.held, self.agent_on)
        self.held = np.where(dropped, NOTHING, self.held)

        # growth on contact (a supply and a living thing it feeds; an object grows once)
        touching = np.flatnonzero(contact_a >= 0)
        if len(touching):
            a_slot, b_slot = contact_a[touching], contact_b[touching]
            a_obj, b_obj = self.objects[touching, a_slot], self.objects[touching, b_slot]
            grows_b = feeds(a_obj, b_obj)
            grows_a = feeds(b_obj, a_obj)
            slot = np.where(grows_b, b_slot, np.where(grows_a, a_slot, NOTHING))
            new = (slot >= 0) & ~self.grown[touching, np.maximum(slot, 0)]
            envs, slot = touching[new], slot[new]
            self.grown[envs, slot] = True
            event_kind[envs], event_slot[envs] = 2, slot

        self.steps += 1
        achieved = [[] for _ in rows]
        reward = np.zeros(self.batch_size, dtype=np.float32)
        for b in np.flatnonzero(event_kind):
            goals = self._social_partner(b, event_kind[b] == 2, self.objects[b, event_slot[b]])
            reward[b] = float(self.goal_id[b] in goals)
            achieved[b] = [g for g in goals if self.reportable[g]]
        terminated = reward > 0
        truncated = ~terminated & (self.steps >= self.max_steps)
        return StepResult(reward, terminated, truncated, achieved)

    def _social_partner(self, b: int, is_grow: bool, obj: int) -> list[int]:
        """Every goal of the grammar achieved for the first time at this step in sub-env ``b``.

        Singles: each description of the event's object, the first time its event happens.
        Sequential "A then b": an event matching B now, A's first event at an earlier step.
        """
        cat, t = self.catalogue, int(self.steps[b])
        descriptions = cat.object_descriptions[obj]
        singles = (cat.grow_goal_of if is_grow else cat.grasp_goal_of)[descriptions]
        done = self._singles_done[b]
        earlier_grows = [s for s, step in done.items() if step < t and cat.single_is_grow[s]]
        achieved = [int(s) for s in singles if s not in done]
        if earlier_grows:
            pairs = cat.sequential_id[np.ix_(earlier_grows, singles)].ravel()
            reported = self._sequential_done[b]
            fresh = [int(g) for g in pairs if g >= 0 and g not in reported]
            reported.update(fresh)
            achieved += fresh
        for s in achieved:
            if s < cat.num_single:
                done[s] = t
        return achieved
