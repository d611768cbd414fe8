"""BabyAI-Text behind :class:`~torchrl_glam.envs.protocol.TextEnvironment`: the registered
environment ``"babyai"`` (needs ``minigrid``, imported only when it is chosen). Importing it loads
no torch: a config is checked against :class:`BabyAIText`'s metadata before torch and TorchRL load,
which the methods that build or compute import.

Goal sets: ``"train"`` plays MixedTrainLocal and ``"test"`` MixedTestLocal (the catalogue's sets of
the same names: the goals those levels ask); the config's ``goal_types`` restricts both to some task
kinds (e.g. ``goal_types=[goto,pickup]``: GoToLocal's and PickupLocal's kinds of mission). Optional
capabilities: the no-op rule, and the goals that fit an episode's room (HER's scene negatives and
twins); minigrid generates each mission with its grid, so there is no goal choice at reset (no
autotelic agent, and ``goal_sampling="by_type"`` draws episodes as ``"uniform"`` does: evaluation
groups them by ``goal_type``), and no aligned-goal filter or curricula by category or colour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from torchrl_glam.envs.babyai.text import (
    ACTIONS,
    GOAL_TYPES,
    HISTORY_KEYS,
    MAX_HISTORY,
    STATE_KEYS,
    STEP_STATE_KEYS,
    WORDINGS,
    BabyAIGoalCatalogue,
    action_mask_from_state,
    check_wording,
    describe_view,
    render_batch,
    vocabulary_words,
)
from torchrl_glam.envs.options import EnvOption
from torchrl_glam.envs.protocol import TextEnvironment

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase
    from torchrl.envs import EnvBase

    from torchrl_glam.envs.babyai.torchrl_env import BabyAITextEnv

#: goal set -> the level that asks its goals
LEVEL_OF_GOAL_SET = {"train": "MixedTrainLocal", "test": "MixedTestLocal"}


def transcript_text(environment: BabyAIText) -> str:
    """The text of its offline models' transcripts: a model pretrained on another wording is not reused."""
    return environment.wording


#: How its offline tiny models are pretrained (``torchrl_glam.offline.recipes``, declared in the
#: entry-point group "torchrl_glam.transcript_recipes")
TRANSCRIPT_RECIPE = {"max_steps": 20, "text": transcript_text}


class BabyAIText(TextEnvironment):
    """BabyAI-Text (``experiments/babyai/design_notes.md``); ``mask_noops``: the environments it builds mask the
    actions that cannot change anything (and the action mask rule says so); ``history``: the past
    observations its prompts show (GLAM: 2), part of the compact state then; ``wording``: the
    prompts' text, "glam" (GLAM's exactly, the default; ``None`` means it) or "readable" (this
    project's former wording). The config's ``history`` and ``wording`` fields: :meth:`with_options`.

    Examples:
        >>> from torchrl_glam.envs import get_environment
        >>> babyai = get_environment("babyai")  # the registered instance of this class
        >>> type(babyai).__name__, babyai.goal_types
        ('BabyAIText', ('goto', 'pickup', 'open', 'putnext', 'pickup_then_goto'))
        >>> babyai.state_keys, babyai.with_options(history=2).history
        (('goal_id', 'objects', 'image', 'carrying'), 2)
        >>> env = babyai.make_env(2, seed=0)  # a BabyAITextEnv without the text keys
        >>> babyai.num_actions(env), babyai.action_mask(env.reset()).shape
        (6, torch.Size([2, 6]))
    """

    name = "babyai"
    # the room's objects, (type, colour) rows: not rendered (the prompt shows the view), kept for
    # goals_in_scene
    episode_keys = (*STATE_KEYS[:1], "objects")
    step_keys = STEP_STATE_KEYS
    goal_types = GOAL_TYPES
    goal_sets = tuple(LEVEL_OF_GOAL_SET)
    held_out_goal_set = "test"
    options = (
        EnvOption(
            "goal_types",
            list[str] | None,
            None,
            "the goal types (task kinds) its Mixed levels draw, for training and evaluation alike, "
            "e.g. [goto, pickup]; None: all five",
            choices=GOAL_TYPES,
        ),
        EnvOption(
            "level_time_limits",
            bool,
            False,
            "each episode's time limit is minigrid's for its mission (GLAM: 64 steps for go to / pick up, "
            "128 for open, put next to and the sequences), at most max_steps",
        ),
        EnvOption(
            "history",
            int,
            0,
            "past observations shown in the prompt before the current one, each with the action taken "
            "after it (GLAM shows 2); 0: the current observation only",
            minimum=0,
            maximum=MAX_HISTORY,
            state=True,
        ),
        EnvOption(
            "wording",
            str | None,
            None,
            'the prompts\' text, "glam" (GLAM\'s exactly, the default; none means it) or "readable" '
            "(this project's former wording)",
            choices=WORDINGS,
            state=True,
        ),
    )

    def __init__(
        self,
        mask_noops: bool = False,
        catalogue: BabyAIGoalCatalogue | None = None,
        history: int = 0,
        wording: str | None = None,
    ) -> None:
        self.mask_noops = mask_noops
        self._catalogue = catalogue
        self.history = history
        self.wording = check_wording(wording or WORDINGS[0])
        self.step_keys = STEP_STATE_KEYS + (HISTORY_KEYS if history else ())
        self._variants: dict[tuple, BabyAIText] = {(history, self.wording): self}

    def with_options(self, history: int = 0, wording: str | None = None) -> BabyAIText:
        """This environment with ``history`` past observations in its prompts, in ``wording``
        (one instance per value, so that the library's objects of one run share it)."""
        key = (history, check_wording(wording or WORDINGS[0]))
        if key not in self._variants:
            self._variants[key] = BabyAIText(self.mask_noops, self._catalogue, *key)
            self._variants[key]._variants = self._variants
        return self._variants[key]

    @property
    def catalogue(self) -> BabyAIGoalCatalogue:
        return self._catalogue or BabyAIGoalCatalogue.default()

    def make_env(
        self,
        num_envs: int,
        seed: int | None = None,
        goals: str | None = None,
        max_steps: int | None = None,
        goal_sampling: str = "uniform",
        goal_types: Sequence[str] | None = None,
        level_time_limits: bool = False,
        **options,
    ) -> BabyAITextEnv:
        """``goals``: "train" (MixedTrainLocal, the default) or "test" (MixedTestLocal);
        ``goal_types``: the task kinds drawn (default all of :data:`GOAL_TYPES`; the environment's
        ``kinds``); ``options``: those of :class:`~torchrl_glam.envs.babyai.torchrl_env.BabyAITextEnv`
        (``level`` overrides the goal set's); ``level_time_limits``: minigrid's time limit of each
        mission (GLAM's), at most ``max_steps``."""
        from torchrl_glam.envs.babyai.torchrl_env import BabyAITextEnv

        goals = goals or "train"
        if goals not in LEVEL_OF_GOAL_SET:
            raise ValueError(f"goals={goals!r} is not a BabyAI-Text goal set; choose one of {self.goal_sets}")
        if goal_sampling not in ("uniform", "by_type"):
            raise ValueError(f"goal_sampling={goal_sampling!r}; choose 'uniform' or 'by_type'")
        options.setdefault("level", LEVEL_OF_GOAL_SET[goals])
        if goal_types is not None:
            options["kinds"] = tuple(goal_types)
        return BabyAITextEnv(
            num_envs=num_envs,
            seed=seed,
            text=False,
            wording=self.wording,
            mask_noops=self.mask_noops,
            max_steps=max_steps,
            history=self.history,
            level_time_limits=level_time_limits,
            **options,
        )

    def num_actions(self, env: EnvBase) -> int:
        return len(ACTIONS)

    def render(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[list[str]]]:
        past = {k: state[k] for k in HISTORY_KEYS} if self.history else {}
        return render_batch(*(state[k] for k in STATE_KEYS), catalogue=self.catalogue, **past, wording=self.wording)

    def action_mask(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return action_mask_from_state(state["image"], state["carrying"], self.mask_noops)

    def vocabulary_words(self) -> list[str]:
        return vocabulary_words()

    def transcript_targets(self, steps: Mapping[str, torch.Tensor], candidates: list[list[str]]) -> list[str]:
        """The chosen action, then the next observation, then the social partner's reports:
        "go forward : You see a wall 1 step forward, You see a red ball 1 step left : nothing" (the
        observation's sentences in the prompts' wording)."""
        nxt, goals = steps["next"], self.catalogue.goals
        targets = []
        for b, chosen in enumerate(steps["action"].tolist()):
            seen = describe_view(nxt["image"][b].numpy(), nxt["carrying"][b].tolist(), self.wording)
            reports = [goals[g] for g in nxt["achieved_goal_ids"][b, : int(nxt["achieved_goal_count"][b])].tolist()]
            targets.append(
                f"{candidates[b][chosen]} : {', '.join(seen) if seen else 'You see nothing'} : "
                f"{', '.join(reports) if reports else 'nothing'}"
            )
        return targets

    def goals_in_scene(self, episode_state: Mapping[str, torch.Tensor], goal_ids: torch.Tensor) -> torch.Tensor:
        """The goals whose every description fits the episode's room as minigrid's ``ObjDesc``
        reads it ("the": exactly one object fits, "a": several), from the room at the reset."""
        import torch

        objects = episode_state["objects"].cpu().numpy()
        fits = (
            np.stack([self.catalogue.goals_in_scene(room) for room in objects])
            if len(objects)
            else np.zeros((0, len(self.catalogue)), dtype=bool)
        )
        return torch.from_numpy(fits)[:, torch.as_tensor(goal_ids)]

    def reset_in_groups(self, env: Any, group_size: int) -> TensorDictBase:
        """Each group of ``group_size`` sub-environments from one start: the same level (kind and seed) and mission."""
        from torchrl_glam.envs.env_state import reset_in_groups

        return reset_in_groups(env, group_size)

    def noop_actions(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Pick up, drop and toggle where minigrid's conditions for them to change anything fail
        (with empty hands "drop", with full hands "pick up": every state has one)."""
        return ~action_mask_from_state(state["image"], state["carrying"], mask_noops=True)


__all__ = ["BabyAIText", "LEVEL_OF_GOAL_SET"]
