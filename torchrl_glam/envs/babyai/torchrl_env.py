"""BabyAI-Text (GLAM's benchmark, Carta et al. 2023) as a natively batched TorchRL environment.

One :class:`BabyAITextEnv` steps ``num_envs`` minigrid BabyAI levels (``pip install
torchrl_glam[babyai]``) in one process. Keys, with B = ``num_envs``:

======================== ============== ======================================================
key                      shape          meaning
======================== ============== ======================================================
"prompt"                 [B] text       GLAM's prompt, exactly (``wording``: :mod:`torchrl_glam.envs.babyai.text`)
"actions"                [B] text       the six candidate actions (a list each)
"action_mask"            [B, 6] bool    all True (``mask_noops=True``: no-op pick up/drop/toggle off)
"goal", "goal_id"        [B]            the mission, as text and as a catalogue index
"image"                  [B, 7, 7, 3]   compact state: minigrid's encoded egocentric view (uint8)
"carrying"               [B, 2] int     compact state: [type, color] indices of the carried object, -1
"objects"                [B, M, 2] int  the scene at the reset: (type, color) of each object, -1 rows
"past_images", ...       [B, H, ...]    with ``history=H``: the H views before, what was carried and the
                                        action taken after each (-1: before the episode), oldest first
"achieved_goals"         [B] text       the social partner's reports at the last step (a list each)
"achieved_goal_ids"      [B, K] int     the same as catalogue ids, padded with -1 ...
"achieved_goal_count"    [B] int        ... and how many are valid
"success"                [B] bool       the mission was achieved at the last step
"action"                 [B] int        input: an index into the candidates
"reward", "done", ...    [B, 1]         under "next" after a step
======================== ============== ======================================================

Reward (``reward="binary"``, the default) is 1 on the step that achieves the mission, else 0: the
reward that hindsight relabeling gives (torchrl_glam.data.her), so relabeled and real transitions
agree. ``reward="minigrid"`` gives minigrid's own ``1 - 0.9 * step_count / max_steps`` on success.
Either way the episode terminates on success, exactly when the mission is among "achieved_goals".
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np
import torch
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.core.roomgrid import RoomGrid
from minigrid.envs import babyai as minigrid_babyai
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling, RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
    pos_next_to,
)
from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, NonTensor
from torchrl.envs import EnvBase

from torchrl_glam.envs.babyai.text import (
    ACTIONS,
    HELD_OUT_PAIRS,
    HISTORY_KEYS,
    MAX_HISTORY,
    MOVABLE_TYPES,
    OBJ_TYPES,
    VIEW_SIZE,
    BabyAIGoalCatalogue,
    action_mask_from_state,
    check_wording,
    describe_object,
    render_batch,
)
from torchrl_glam.envs.env_state import ReplayedEpisodes

MIXED_KINDS = ("goto", "pickup", "open", "putnext", "pickup_then_goto")
MIXED_LEVELS = {"MixedTrainLocal": "train", "MixedTestLocal": "test"}
#: minigrid BabyAI levels whose missions all lie in the grammar (one go to / pick up / open / put next
#: to without locations; read from their gen_mission, checked in tests/envs/test_babyai_text.py)
GRAMMAR_LEVELS = (
    "GoToRedBallGrey", "GoToRedBall", "GoToRedBallNoDists", "GoToRedBlueBall", "GoToObj", "GoToLocal",
    "GoToDoor", "GoToObjDoor", "GoTo", "GoToImpUnlock", "PickupAbove", "Pickup", "UnblockPickup", "OneRoomS8",
    "OpenRedDoor", "Open", "Unlock", "UnlockLocal", "PutNextLocal", "ActionObjDoor",
)  # fmt: skip
LEVELS = (*MIXED_LEVELS, *GRAMMAR_LEVELS)
#: An upper bound on the goals reported at one step, the width of "achieved_goal_ids" (exceeding it
#: raises: a few goto / pick up / open / put-next reports, and 2 sequences per (picked, reached) pair).
MAX_REPORTS = 256
_PICKUP, _DROP, _TOGGLE = ACTIONS.index("pick up"), ACTIONS.index("drop"), ACTIONS.index("toggle")


# ---------------------------------------------------------------------------- levels
class MixedLocalLevel(RoomGridLevel):
    """One task kind of GLAM's MixedTrainLocal / MixedTestLocal, built from minigrid's level API.

    ``kind``: "goto", "pickup", "putnext", "pickup_then_goto" (one 8x8 room, 9 or 10 objects) or
    "open" (two rooms, a locked door whose key lies on the agent's side). ``split="train"`` never
    names a held-out color-type pair (yellow box, red key, red door, green ball, grey door);
    ``split="test"`` names only held-out pairs. Missions are drawn by rejection, as GLAM does.
    """

    def __init__(self, split: str = "train", kind: str = "goto", room_size: int = 8, num_dists: int = 8, **kwargs):
        if split not in ("train", "test"):
            raise ValueError(f"split={split!r}: choose 'train' or 'test'")
        if kind not in MIXED_KINDS:
            raise ValueError(f"kind={kind!r}: choose one of {MIXED_KINDS}")
        self.split, self.kind, self.num_dists = split, kind, num_dists
        num_cols = 2 if kind == "open" else 1
        super().__init__(room_size=room_size, num_rows=1, num_cols=num_cols, **kwargs)

    def _gen_grid(self, width: int, height: int) -> None:
        # own rejection loop: RoomGridLevel's prints every rejection, and the test split rejects most
        for _ in range(10_000):
            RoomGrid._gen_grid(self, width, height)
            instr = self._open() if self.kind == "open" else self._one_room()
            if instr is not None and self._in_split(instr):
                break
        else:
            raise RuntimeError(f"no {self.split} mission of kind {self.kind!r} after 10000 tries")
        self.instrs = instr
        self.surface = self.mission = instr.surface(self)

    def _in_split(self, instr) -> bool:
        pairs = [(d.color, d.type) for d in _descs(instr)]
        if self.split == "train":
            return not any(p in HELD_OUT_PAIRS for p in pairs)
        return all(p in HELD_OUT_PAIRS for p in pairs)

    def _movable(self, objs):
        return self._rand_elem([o for o in objs if o.type in MOVABLE_TYPES])

    def _second(self, first, objs):
        # the second object may share the first's description only when it describes several objects
        second = self._rand_elem(objs)
        if (second.type, second.color) == (first.type, first.color):
            if len(ObjDesc(first.type, first.color).find_matching_objs(self)[0]) < 2:
                second = self._rand_elem([o for o in objs if (o.type, o.color) != (first.type, first.color)])
        return second

    def _one_room(self):
        self.place_agent()
        extra = 1 if self.kind in ("goto", "pickup") else 2
        objs = self.add_distractors(num_distractors=self.num_dists + extra, all_unique=False)
        if not self.check_objs_reachable(raise_exc=False):
            return None
        if self.kind == "goto":
            obj = self._rand_elem(objs)
            return GoToInstr(ObjDesc(obj.type, obj.color))
        first = self._movable(objs)
        if self.kind == "pickup":
            return PickupInstr(ObjDesc(first.type, first.color))
        second = self._second(first, objs)
        move, other = ObjDesc(first.type, first.color), ObjDesc(second.type, second.color)
        if self.kind == "putnext":
            instr = PutNextInstr(move, other)
            try:
                self.validate_instrs(instr)  # minigrid's rejections: already next to, same objects
            except RejectSampling:
                return None
            return instr
        if self._rand_bool():
            return BeforeInstr(PickupInstr(move), GoToInstr(other))
        return AfterInstr(GoToInstr(other), PickupInstr(move))

    def _open(self):
        colors = ("red", "grey") if self.split == "test" else ("yellow", "green", "blue", "purple")
        color = self._rand_elem(colors)
        locked = self._rand_int(0, 2)  # which of the two rooms is locked
        self.add_door(locked, 0, 0 if locked == 0 else 2, color=color, locked=True)
        self.add_object(1 - locked, 0, "key", color)
        self.add_distractors(1 - locked, 0, num_distractors=self.num_dists, all_unique=False)
        self.place_agent(1 - locked, 0)
        if not self.check_objs_reachable(raise_exc=False):
            return None
        named = color if self.split == "test" else self._rand_elem([None, color])
        return OpenInstr(ObjDesc("door", named))


def _descs(instr) -> list:
    """The object descriptions an instruction names."""
    if isinstance(instr, (BeforeInstr, AfterInstr)):
        return _descs(instr.instr_a) + _descs(instr.instr_b)
    return [getattr(instr, a) for a in ("desc", "desc_move", "desc_fixed") if hasattr(instr, a)]


def make_level(level: str, kind: str | None = None, max_steps: int | None = None) -> RoomGridLevel:
    """A minigrid level instance: a Mixed level's ``kind``, or a minigrid BabyAI level by name;
    ``max_steps``: minigrid's time limit (``None``: the level's own)."""
    if level in MIXED_LEVELS:
        return MixedLocalLevel(split=MIXED_LEVELS[level], kind=kind, max_steps=max_steps)
    return getattr(minigrid_babyai, level)(max_steps=max_steps)


# ---------------------------------------------------------------------------- social partner
class SocialPartner:
    """Reports, after each step of one minigrid level, every instruction of the grammar that the step
    achieved, with the semantics of minigrid's verifier (``minigrid.envs.babyai.core.verifier``), each
    instruction judged as if it were the mission since the episode began:

    * go to D: the agent faces a position of an object matching D (positions as at the reset,
      refreshed after each drop, as ``GoToInstr`` tracks them);
    * pick up M: a pick up that took an object matching M while carrying nothing;
    * open R: a toggle that left a door matching R open in front of the agent;
    * put M next to D: a drop that put an object matching M beside a position of one matching D
      (pairs whose matches overlap are not instructions: minigrid rejects them);
    * pick up M, then go to D / go to D after you pick up M: go to D now, pick up M at this step or before.

    Descriptions read "the" when one object matched at the reset and "a" otherwise (``ObjDesc.surface``).
    """

    def reset(self, level: RoomGridLevel) -> None:
        self.level = level
        objs = [o for o in level.grid.grid if o is not None and o.type in OBJ_TYPES]
        self.matches: dict[tuple, list] = {}
        for o in objs:  # each object matches its (type, color) and its (type, None) description
            for key in ((o.type, o.color), (o.type, None)):
                self.matches.setdefault(key, []).append(o)
        self.surface = {
            key: describe_object(key[0], key[1], "the" if len(found) == 1 else "a")
            for key, found in self.matches.items()
        }
        self._refresh_positions()
        self.picked: list[tuple] = []  # descriptions picked up so far, in order

    def _refresh_positions(self) -> None:
        grid = self.level.grid
        where = {id(o): (i % grid.width, i // grid.width) for i, o in enumerate(grid.grid) if o is not None}
        self.positions = {k: {where[id(o)] for o in found if id(o) in where} for k, found in self.matches.items()}

    def _keys_of(self, obj) -> list[tuple]:
        return [k for k in ((obj.type, obj.color), (obj.type, None)) if any(o is obj for o in self.matches.get(k, ()))]

    def step(self, action: int, carried_before) -> list[str]:
        level, s = self.level, self.surface
        if action == _DROP:
            self._refresh_positions()
        front = tuple(int(v) for v in level.front_pos)
        reached = [k for k, pos in self.positions.items() if front in pos]
        goals = [f"go to {s[k]}" for k in reached]
        if action == _PICKUP and carried_before is None and level.carrying is not None:
            taken = self._keys_of(level.carrying)
            goals += [f"pick up {s[k]}" for k in taken]
            self.picked += [k for k in taken if k not in self.picked]
        if action == _TOGGLE and 0 <= front[0] < level.width and 0 <= front[1] < level.height:
            cell = level.grid.get(*front)
            if cell is not None and cell.type == "door" and cell.is_open:
                goals += [f"open {s[k]}" for k in self._keys_of(cell)]
        if action == _DROP and carried_before is not None and level.carrying is None:
            moved = self._keys_of(carried_before)
            at = tuple(int(v) for v in carried_before.cur_pos)
            beside = [k for k, pos in self.positions.items() if any(pos_next_to(at, p) for p in pos)]
            for m in moved:
                mine = {id(o) for o in self.matches[m]}
                goals += [f"put {s[m]} next to {s[k]}" for k in beside if not mine & {id(o) for o in self.matches[k]}]
        for m in self.picked:
            for k in reached:
                goals += [f"pick up {s[m]}, then go to {s[k]}", f"go to {s[k]} after you pick up {s[m]}"]
        return goals


# ---------------------------------------------------------------------------- environment
def _text(values: list, device: torch.device) -> NonTensorStack:
    """One text (or list of texts) per sub-environment, as a stack TorchRL can index and stack."""
    return NonTensorStack(*[NonTensorData(data=v, device=device) for v in values], device=device)


_NOTHING = (-1, -1)


def _indices(obj) -> tuple[int, int]:
    """(type, color) of a minigrid object, as minigrid's encoding numbers them."""
    return OBJECT_TO_IDX[obj.type], COLOR_TO_IDX[obj.color]


_EXAMPLE_PROMPT = (
    "Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle \n Goal of the agent: "
    "go to the red ball \n Observation 0: You see a wall 2 steps forward, \n Action 0: "
)


class BabyAITextEnv(ReplayedEpisodes, EnvBase):
    """BabyAI-Text, batched over ``num_envs`` minigrid levels.

    Args:
        num_envs (int): number of sub-environments stepped together (the batch size).
        level (str): "MixedTrainLocal" or "MixedTestLocal" (GLAM's mixes: each reset draws one of
            :data:`MIXED_KINDS` uniformly), or a minigrid level of :data:`GRAMMAR_LEVELS`.
        seed (int | None): seed of the level sampler; same seed, same levels, missions and rollouts.
        device (torch.device | str): where the output tensors live.
        text (bool): write the text keys ("prompt", "actions", "goal", "achieved_goals"); without them the
            compact state re-renders them (:class:`~torchrl_glam.envs.babyai.transforms.RenderBabyAIText`).
        reward (str): "binary" (1 on success) or "minigrid" (``1 - 0.9 * step_count / max_steps``).
        mask_noops (bool): mask "pick up", "drop" and "toggle" where they cannot change anything.
        kinds (Sequence[str] | None): for a Mixed level, the task kinds drawn (a subset of :data:`MIXED_KINDS`, e.g.
            ``("goto", "pickup")`` for a cheaper training set); default all five.
        reported_goals (Sequence[str] | None): the goal sets of the catalogue the social partner reports ("all",
            "train", "test"); default: "train" on MixedTrainLocal, so that hindsight relabeling never trains
            on the held-out goals, "train" and "test" on MixedTestLocal, "all" elsewhere.
        catalogue (BabyAIGoalCatalogue | None): the goal grammar (shared default when omitted).
        max_steps (int | None): the episodes' time limit (a truncation); ``None``: each minigrid level's own.
        level_time_limits (bool): each episode's limit is minigrid's for its mission (GLAM's: 64 steps for
            go to and pick up, 128 for open, put next to and the sequences), at most ``max_steps``.
        history (int): past observations shown in the prompt before the current one, each with the action
            taken after it (GLAM shows 2); they are part of the compact state (:data:`HISTORY_KEYS`).
        wording (str): the prompts' text, "glam" (GLAM's exactly, the default) or "readable" (this
            project's former wording); see :mod:`torchrl_glam.envs.babyai.text`.

    Examples:
        >>> from torchrl_glam.envs.babyai import BabyAITextEnv
        >>> env = BabyAITextEnv(num_envs=2, seed=0)  # MixedTrainLocal (needs the [babyai] extra)
        >>> td = env.reset()
        >>> td["goal"][0]
        'pick up the grey ball, then go to a grey key'
        >>> td["actions"][0]
        ['turn left', 'turn right', 'go forward', 'pick up', 'drop', 'toggle']
        >>> td["image"].shape, td["image"].dtype, td["action_mask"].shape  # the compact state: minigrid's view
        (torch.Size([2, 7, 7, 3]), torch.uint8, torch.Size([2, 6]))
        >>> td["action"] = td["action_mask"].int().argmax(-1)
        >>> env.step(td)["next", "reward"].shape
        torch.Size([2, 1])
    """

    batch_locked = True

    def __init__(
        self,
        num_envs: int = 1,
        level: str = "MixedTrainLocal",
        seed: int | None = None,
        device: torch.device | str = "cpu",
        text: bool = True,
        reward: str = "binary",
        mask_noops: bool = False,
        kinds: Sequence[str] | None = None,
        reported_goals: Sequence[str] | None = None,
        catalogue: BabyAIGoalCatalogue | None = None,
        max_steps: int | None = None,
        history: int = 0,
        level_time_limits: bool = False,
        wording: str = "glam",
    ) -> None:
        check_wording(wording)
        if level not in LEVELS:
            raise ValueError(
                f"unknown level {level!r}; choose one of {LEVELS} (minigrid levels whose missions "
                "leave the go to / pick up / open / put next to grammar are not supported)"
            )
        if reward not in ("binary", "minigrid"):
            raise ValueError(f"reward={reward!r}: choose 'binary' (0/1) or 'minigrid' (1 - 0.9 t/T)")
        if num_envs < 1:
            raise ValueError(f"num_envs={num_envs} must be at least 1")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1 (or None: the level's own)")
        if not 0 <= history <= MAX_HISTORY:
            raise ValueError(f"history={history}: from 0 to {MAX_HISTORY} past observations in the prompt (GLAM: 2)")
        if kinds is not None and (level not in MIXED_LEVELS or not kinds or set(kinds) - set(MIXED_KINDS)):
            raise ValueError(
                f"kinds={kinds!r}: a non-empty subset of {MIXED_KINDS}, for the Mixed levels {tuple(MIXED_LEVELS)} only"
            )
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        self.catalogue = catalogue or BabyAIGoalCatalogue.default()
        if reported_goals is None:
            reported_goals = {"MixedTrainLocal": ("train",), "MixedTestLocal": ("train", "test")}.get(level, ("all",))
        self.reportable = np.zeros(len(self.catalogue), dtype=bool)
        for name in reported_goals:
            self.reportable[self.catalogue.goal_set(name)] = True
        self.level, self.num_envs, self.text, self.wording = level, num_envs, text, wording
        self.reward_kind, self.mask_noops = reward, mask_noops
        kinds = tuple(kinds or MIXED_KINDS) if level in MIXED_LEVELS else (None,)
        # one minigrid instance per (sub-environment, kind): a kind fixes the grid's size
        self.level_time_limits = level_time_limits
        level_limit = None if level_time_limits else max_steps
        self._levels = [{k: make_level(level, k, level_limit) for k in kinds} for _ in range(num_envs)]
        self.max_steps = max_steps
        self._kinds = kinds
        self.envs: list[RoomGridLevel] = [lv[kinds[0]] for lv in self._levels]
        self.partners = [SocialPartner() for _ in range(num_envs)]
        self._achieved: list[list[int]] = [[] for _ in range(num_envs)]  # goal ids
        # each episode as [kind index, level seed] and its actions: what state_dict replays
        self._episodes: list[list[int]] = [[0, 0] for _ in range(num_envs)]
        self._actions: list[list[int]] = [[] for _ in range(num_envs)]
        self._success = np.zeros(num_envs, dtype=bool)
        self._goal_id = np.zeros(num_envs, dtype=np.int64)
        self._image = np.zeros((num_envs, VIEW_SIZE, VIEW_SIZE, 3), dtype=np.uint8)
        self.history = history
        self._past_images = np.zeros((num_envs, history, VIEW_SIZE, VIEW_SIZE, 3), dtype=np.uint8)
        self._past_carrying = np.full((num_envs, history, 2), -1, dtype=np.int64)
        self._past_actions = np.full((num_envs, history), -1, dtype=np.int64)
        self.max_objects = 16 if level in MIXED_LEVELS else 64  # Mixed: at most 10; minigrid's 3x3 mazes: ~40
        self._objects = np.full((num_envs, self.max_objects, 2), -1, dtype=np.int64)
        self._make_specs()
        self.set_seed(seed)

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        B, A, K, dev = self.num_envs, len(ACTIONS), MAX_REPORTS, self.device
        top = max(OBJECT_TO_IDX.values())
        self.observation_spec = Composite(
            action_mask=Binary(n=A, shape=(B, A), dtype=torch.bool, device=dev),
            goal_id=Categorical(len(self.catalogue), shape=(B,), dtype=torch.int64, device=dev),
            image=Bounded(low=0, high=top, shape=(B, VIEW_SIZE, VIEW_SIZE, 3), dtype=torch.uint8, device=dev),
            carrying=Bounded(low=-1, high=top, shape=(B, 2), dtype=torch.int64, device=dev),
            objects=Bounded(low=-1, high=top, shape=(B, self.max_objects, 2), dtype=torch.int64, device=dev),
            achieved_goal_ids=Bounded(
                low=-1, high=len(self.catalogue) - 1, shape=(B, K), dtype=torch.int64, device=dev
            ),
            achieved_goal_count=Bounded(low=0, high=K, shape=(B,), dtype=torch.int64, device=dev),
            success=Categorical(2, shape=(B,), dtype=torch.bool, device=dev),
            shape=(B,),
            device=dev,
        )
        if self.history:
            H = self.history
            self.observation_spec["past_images"] = Bounded(
                low=0, high=top, shape=(B, H, VIEW_SIZE, VIEW_SIZE, 3), dtype=torch.uint8, device=dev
            )
            self.observation_spec["past_carrying"] = Bounded(
                low=-1, high=top, shape=(B, H, 2), dtype=torch.int64, device=dev
            )
            self.observation_spec["past_actions"] = Bounded(
                low=-1, high=A - 1, shape=(B, H), dtype=torch.int64, device=dev
            )
        if self.text:
            examples = {
                "prompt": _EXAMPLE_PROMPT,
                "actions": list(ACTIONS),
                "goal": "go to the red ball",
                "achieved_goals": [],
            }
            for key, example in examples.items():
                self.observation_spec[key] = NonTensor(shape=(B,), example_data=example, device=dev)
        self.action_spec = Categorical(A, shape=(B,), dtype=torch.int64, device=dev)
        self.reward_spec = Bounded(low=0.0, high=1.0, shape=(B, 1), dtype=torch.float32, device=dev)
        done = Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev)
        self.done_spec = Composite(done=done, terminated=done.clone(), truncated=done.clone(), shape=(B,), device=dev)

    # ------------------------------------------------------------------ EnvBase API
    def _set_seed(self, seed: int | None) -> None:
        self.seed_value = seed  # the last seed given (None: fresh entropy)
        self.rng = np.random.default_rng(seed)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        B = self.num_envs
        reset = np.ones(B, dtype=bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            reset = tensordict.get("_reset").reshape(B).cpu().numpy()
        for b in np.flatnonzero(reset):
            kind = int(self.rng.integers(len(self._kinds)))
            self._reset_one(b, kind, int(self.rng.integers(2**31)))
        return self.observation()

    def _reset_one(self, b: int, kind: int, level_seed: int) -> None:
        env = self.envs[b] = self._levels[b][self._kinds[kind]]
        # minigrid's own levels print each rejected draw; their mission is what matters here
        with contextlib.redirect_stdout(io.StringIO()):
            obs, _ = env.reset(seed=level_seed)
        if self.level_time_limits and self.max_steps is not None:
            env.max_steps = min(env.max_steps, self.max_steps)  # minigrid sets it at each reset
        self._episodes[b], self._actions[b] = [kind, level_seed], []
        self._goal_id[b] = self._mission_id(env)
        self._image[b] = obs["image"]
        self._past_images[b], self._past_carrying[b], self._past_actions[b] = 0, -1, -1
        self.partners[b].reset(env)
        self._objects[b] = -1
        scene = [_indices(o) for o in env.grid.grid if o is not None and o.type in OBJ_TYPES]
        if len(scene) > self.max_objects:
            raise RuntimeError(
                f"{len(scene)} objects in a {self.level} scene, more than max_objects={self.max_objects}"
            )
        self._objects[b, : len(scene)] = scene
        self._achieved[b], self._success[b] = [], False

    def _replay_episode(self, b: int, episode: list, actions: list) -> None:
        """The level's kind and seed, then the actions since (minigrid's Python objects would need
        pickle; a replay rebuilds them exactly)."""
        kind, level_seed = episode
        if not 0 <= kind < len(self._kinds):
            raise ValueError(
                f"kind index {kind} of sub-environment {b} does not exist here: the "
                f"state is of another level or kinds than {self.level} {self._kinds}"
            )
        self._reset_one(b, int(kind), int(level_seed))
        for action in actions:
            self._step_one(b, int(action))

    def _mission_id(self, env: RoomGridLevel) -> int:
        if env.mission not in self.catalogue:
            raise RuntimeError(f"level {self.level!r} gave the mission {env.mission!r}, outside the grammar")
        return self.catalogue.id_of(env.mission)

    def _check_action(self, tensordict: TensorDictBase) -> np.ndarray:
        action = tensordict.get("action")
        if action.dtype == torch.bool or action.is_floating_point() or action.is_complex():
            raise TypeError(
                f"'action' has dtype {action.dtype}; pass integer indices into the {len(ACTIONS)} candidate "
                f"actions {ACTIONS} (e.g. action.long(); one-hot actions: action.argmax(-1))"
            )
        if action.numel() == self.num_envs:  # [B] or [B, 1]
            action = action.reshape(self.num_envs)
        if action.shape != (self.num_envs,):
            raise ValueError(
                f"'action' must be {self.num_envs} indices (shape [{self.num_envs}]), got {tuple(action.shape)}"
            )
        action = action.cpu().numpy()
        bad = np.flatnonzero((action < 0) | (action >= len(ACTIONS)))
        if bad.size:
            raise ValueError(
                f"action {int(action[bad[0]])} of sub-environment {int(bad[0])} is out of range; actions are "
                f"indices 0..{len(ACTIONS) - 1} into {ACTIONS}"
            )
        mask = self._action_mask()
        masked = np.flatnonzero(~mask[np.arange(self.num_envs), action])
        if masked.size:
            b = int(masked[0])
            raise ValueError(
                f"action {int(action[b])} ({ACTIONS[action[b]]!r}) of sub-environment {b} is masked "
                "(it cannot change anything there); sample from the legal actions of 'action_mask'"
            )
        return action

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._step_each(self._check_action(tensordict))

    def _step_one(self, b: int, action: int) -> tuple[float, bool, bool]:
        """Steps sub-environment ``b``: its reward, terminated, truncated."""
        env = self.envs[b]
        carried_before = env.carrying
        if self.history:  # the view being left, what was carried in it and the action, last in the history
            for past in (self._past_images, self._past_carrying, self._past_actions):
                past[b] = np.roll(past[b], -1, axis=0)
            self._past_images[b, -1] = self._image[b]
            self._past_carrying[b, -1] = _indices(carried_before) if carried_before else _NOTHING
            self._past_actions[b, -1] = action
        obs, r, term, trunc, _ = env.step(action)
        self._actions[b].append(action)
        self._image[b] = obs["image"]
        ids = [self.catalogue.id_of(g) for g in self.partners[b].step(action, carried_before)]
        achieved = [g for g in ids if self.reportable[g]]
        if len(achieved) > MAX_REPORTS:
            raise RuntimeError(f"{len(achieved)} goals reported at one step, more than MAX_REPORTS={MAX_REPORTS}")
        self._achieved[b] = achieved
        # minigrid's verifier decides success; the partner's report must contain the mission exactly then
        self._success[b] = success = bool(term and r > 0)
        reward = (float(r) if self.reward_kind == "minigrid" else 1.0) if success else 0.0
        return reward, bool(term), bool(trunc and not term)

    # ------------------------------------------------------------------ output
    def _carrying(self) -> np.ndarray:
        return np.array(
            [_indices(e.carrying) if e.carrying else _NOTHING for e in self.envs],
            dtype=np.int64,
        )

    def _action_mask(self, carrying: np.ndarray | None = None) -> np.ndarray:
        # the rule of the compact state, so that a replay buffer recomputes the same masks
        carrying = self._carrying() if carrying is None else carrying
        mask = action_mask_from_state(torch.from_numpy(self._image), torch.from_numpy(carrying), self.mask_noops)
        return mask.numpy()

    def _observation(self) -> TensorDict:
        B = self.num_envs
        ids = np.full((B, MAX_REPORTS), -1, dtype=np.int64)
        for b, achieved in enumerate(self._achieved):
            ids[b, : len(achieved)] = achieved
        carrying = self._carrying()
        out = TensorDict(
            {
                "action_mask": torch.from_numpy(self._action_mask(carrying)),
                "objects": torch.from_numpy(self._objects.copy()),
                "goal_id": torch.from_numpy(self._goal_id.copy()),
                "image": torch.from_numpy(self._image.copy()),
                "carrying": torch.from_numpy(carrying),
                "achieved_goal_ids": torch.from_numpy(ids),
                "achieved_goal_count": torch.tensor([len(a) for a in self._achieved], dtype=torch.int64),
                "success": torch.from_numpy(self._success.copy()),
            },
            batch_size=self.batch_size,
            device=self.device,
        )
        past = {}
        if self.history:
            past = dict(zip(HISTORY_KEYS, (self._past_images, self._past_carrying, self._past_actions)))
            out.update({k: torch.from_numpy(v.copy()) for k, v in past.items()})
        if self.text:
            prompts, actions = render_batch(
                self._goal_id, self._image, carrying, self.catalogue, **past, wording=self.wording
            )
            out.set("prompt", _text(prompts, self.device))
            out.set("actions", _text(actions, self.device))
            out.set("goal", _text([e.mission for e in self.envs], self.device))
            goals = self.catalogue.goals
            out.set("achieved_goals", _text([[goals[g] for g in a] for a in self._achieved], self.device))
        self.action_spec.update_mask(out["action_mask"])  # action_spec.rand() draws legal actions
        return out


__all__ = [
    "BabyAITextEnv",
    "GRAMMAR_LEVELS",
    "LEVELS",
    "MAX_HISTORY",
    "MAX_REPORTS",
    "MIXED_KINDS",
    "MIXED_LEVELS",
    "MixedLocalLevel",
    "SocialPartner",
    "make_level",
]
