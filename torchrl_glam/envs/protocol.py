"""What the library needs from a text environment: :class:`TextEnvironment`.

``modules/``, ``objectives/``, ``data/`` and ``training/`` reach an environment only through it
(tests/test_layering.py checks the imports). Playground-Text and BabyAI-Text implement it; so can a
user's own environment, registered by name with :func:`~torchrl_glam.envs.register_environment`.

The compact state of a transition: :attr:`TextEnvironment.episode_keys` (``"goal_id"`` first,
then what does not change within an episode) are kept once, at the root; the
:attr:`TextEnvironment.step_keys` are at the root (the state acted in) and under ``"next"`` (the
state after the step). Relabeling a transition is changing its ``"goal_id"``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from torchrl_glam.envs.keys import ACHIEVED_GOAL_COUNT_KEY, ACHIEVED_GOAL_IDS_KEY, GOAL_ID_KEY
from torchrl_glam.envs.options import EnvOption

if TYPE_CHECKING:  # torch and TorchRL load when an environment is built, not when a config is checked
    import torch
    from tensordict import TensorDictBase
    from torchrl.envs import EnvBase
    from torchrl.envs.transforms import Transform


class GoalCatalogueLike(Protocol):
    """The goals of an environment: ``goal_id`` indexes ``goals``; ``goal_type`` (int array
    [num_goals]) indexes the environment's ``goal_types``; ``parts`` (int array [num_goals, 2])
    gives a sequential goal's parts (-1 when absent)."""

    goals: Sequence[str]
    goal_type: Any
    parts: Any

    def __len__(self) -> int: ...

    def id_of(self, goal: str) -> int: ...

    def goal_set(self, name: str) -> Any: ...


class GoalIndex:
    """The lookup every goal catalogue shares: ``goals`` (texts in id order) and ``goal_to_id``,
    set by the catalogue; ``len``, ``in`` and :meth:`id_of` over them. A catalogue says what an
    unknown goal is in :meth:`unknown_goal`."""

    goals: Sequence[str]
    goal_to_id: dict[str, int]

    def __len__(self) -> int:
        return len(self.goals)

    def __contains__(self, goal: str) -> bool:
        return goal in self.goal_to_id

    def id_of(self, goal: str) -> int:
        """The id of a goal text; a ``ValueError`` in :meth:`unknown_goal`'s words when there is none."""
        try:
            return self.goal_to_id[goal]
        except KeyError:
            raise ValueError(self.unknown_goal(goal)) from None

    def unknown_goal(self, goal: str) -> str:
        """Why ``goal`` has no id (the refusal's message)."""
        return f"{goal!r} is no goal of this environment"


class MissingCapability(NotImplementedError):
    """An optional capability of :class:`TextEnvironment` asked of an environment without it."""


class EnvironmentFilesError(Exception):
    """An environment's files (its games, its data) missing, damaged, or that could not be built:
    the message names them and the fix. A command line prints it as one line (the training room
    names this class, never an environment's own subclasses)."""


class EnvironmentStateError(ValueError):
    """A checkpoint's environment state that this environment cannot take back (its games changed
    since, a replayed action it refuses): the message says what differs and the fix, and a resume
    reports it in those words."""


class TextEnvironment(abc.ABC):
    """A text environment as the library sees it: a spec of its compact state and pure functions
    of that state, plus a factory of batched TorchRL environments.

    An ABC rather than a ``typing.Protocol``: the optional capabilities get a default that raises
    a clear :class:`MissingCapability`, which a structural protocol cannot give.

    The environments :meth:`make_env` builds are ``EnvBase`` instances of batch size
    ``[num_envs]`` that output the compact state (:attr:`state_keys`), ``"action_mask"`` (bool
    [B, A]), the reports (``"achieved_goal_ids"`` [B, K] padded with -1, ``"achieved_goal_count"``
    [B]) and take ``"action"``, an index into the A candidates. The reward of a goal is 1 exactly
    when the step reports it: that is what hindsight relabeling relies on. A partner may report a
    goal once, when first achieved (an event), or at every step that holds it (a state):
    relabeling uses each goal's first report in an episode, where the episode would have ended with
    that goal, so both are safe (tests/data/test_her_contract.py replays every relabeled section).
    A step succeeds when it terminates with a reward (``"terminated"`` and ``"reward" > 0``, which
    relabeling rewrites together): an environment may also terminate an episode on a failure (a
    game lost, a wrong object put down), with reward 0, and nothing reads that as a success.
    The training loop also reads their ``num_envs``, ``max_steps`` (no episode is longer: episodes are padded to it),
    ``seed_value`` (the last seed set: evaluation replays the same episodes) and ``catalogue``;
    ``--resume`` needs ``state_dict`` / ``load_state_dict`` (plain data, so that
    ``torch.load(weights_only=True)`` reads checkpoints) and ``observation()``, the current
    observation after a load.

    A config is checked against the class attributes below and :meth:`has` before anything is
    built: an environment whose module imports torch only in the methods that build or compute (as
    Playground-Text's and BabyAI-Text's do) has a bad command line refused before torch loads.
    """

    #: the registry name ("playground", "babyai", ...)
    name: str = ""
    #: root-only keys of a transition, ``"goal_id"`` first
    episode_keys: tuple[str, ...] = (GOAL_ID_KEY,)
    #: keys that change at each step, at the root and under "next"
    step_keys: tuple[str, ...] = ()
    #: the names of the goal types, indexed by ``catalogue.goal_type``
    goal_types: tuple[str, ...] = ()
    #: the names :meth:`make_env` accepts as ``goals`` (``catalogue.goal_set`` knows them too)
    goal_sets: tuple[str, ...] = ("train",)
    #: whether :meth:`make_env`'s ``goal_sampling="by_type"`` draws goal types equally often
    #: (Playground-Text); ``False``: it draws as ``"uniform"`` does (a game's own quest, a level's
    #: mission), and evaluation sets say nothing of goal types
    goal_type_sampling: bool = False
    #: the goal set of held-out evaluation (``None``: the environment has none)
    held_out_goal_set: str | None = None
    #: the environment's own settings, a config's ``env.options`` (typed, bounded and refused by
    #: their declarations): those with ``state=True`` are given to :meth:`with_options`, the others
    #: to :meth:`make_env` (BabyAI-Text: "history" and "wording", "goal_types" and "level_time_limits")
    options: tuple[EnvOption, ...] = ()

    @property
    def state_keys(self) -> tuple[str, ...]:
        """Every key of the compact state, episode keys first."""
        return self.episode_keys + self.step_keys

    @property
    @abc.abstractmethod
    def catalogue(self) -> GoalCatalogueLike:
        """Every goal, its id, its type and the named goal sets."""

    @abc.abstractmethod
    def make_env(
        self,
        num_envs: int,
        seed: int | None = None,
        goals: str | None = None,
        max_steps: int | None = None,
        goal_sampling: str = "uniform",
        **options,
    ) -> EnvBase:
        """A batched environment without text (the compact state only); ``goals`` names a goal set
        (``None``: the first of :attr:`goal_sets`, the training set); ``max_steps``: the time
        limit (a truncation); ``goal_sampling``: "uniform" over the set's goals, or "by_type" (goal
        types equally often, where the environment chooses goals at reset); ``options`` are the
        environment's own."""

    @abc.abstractmethod
    def render(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[list[str]]]:
        """Prompts [B] and candidate actions [B][A] of a flat batch of compact states
        (``state[k]`` for every key of :attr:`state_keys`, batch dimension first)."""

    @abc.abstractmethod
    def action_mask(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The legal actions, bool [B, A], of a flat batch of compact states."""

    @abc.abstractmethod
    def vocabulary_words(self) -> list[str]:
        """Every word of a prompt or of an action, to build a word-level tokenizer from."""

    def observations(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[list[str]], torch.Tensor]:
        """What the LLM reads of a flat batch of compact states: :meth:`render`'s prompts [B] and
        candidates [B][A], and :meth:`action_mask` [B, A]."""
        prompts, actions = self.render(state)
        return prompts, actions, self.action_mask(state)

    def num_actions(self, env: EnvBase) -> int:
        """A, the number of candidates of ``env`` (an environment :meth:`make_env` built)."""
        return int(env.full_action_spec["action"].space.n)

    def render_transform(self, next_state: bool = False) -> Transform:
        """The transform writing "prompt" and "actions" from the compact state (also those under
        "next" with ``next_state``)."""
        from torchrl_glam.envs.transforms import RenderState  # generic: renders with self.render

        return RenderState(self, next_state=next_state)

    def transcript_targets(self, steps: Mapping[str, Any], candidates: list[list[str]]) -> list[str]:
        """The pretraining targets of a flat batch of steps (compact state, ``"action"``, and the
        ``"next"`` state and reports): what the chosen candidate did, in the prompt's words. The
        default: the candidate, then the social partner's reports of the step."""
        goals, nxt = self.catalogue.goals, steps["next"]
        targets = []
        for b, chosen in enumerate(steps["action"].tolist()):
            reports = [goals[g] for g in nxt[ACHIEVED_GOAL_IDS_KEY][b, : int(nxt[ACHIEVED_GOAL_COUNT_KEY][b])].tolist()]
            targets.append(f"{candidates[b][chosen]} : {', '.join(reports) if reports else 'nothing'}")
        return targets

    def episode_metrics(self, episodes: Any) -> dict[str, tuple[float, int]]:
        """The environment's own diagnostics of a padded batch of finished episodes [E, T] (its
        state keys at the root and under ``"next"``, ``"action"``, ``"mask"``): name -> (sum,
        count), logged as the mean ``train/<name>``. Default: none."""
        return {}

    def with_options(self, **options) -> TextEnvironment:
        """This environment with its :attr:`options` of ``state=True`` set (an environment that has
        some overrides this); without options, itself."""
        if options:
            raise TypeError(
                f"the {self.name or type(self).__name__!r} environment takes no state options "
                f"({', '.join(options)}); an environment that does declares them in options with state=True"
            )
        return self

    # optional capabilities: each raises MissingCapability unless the environment has it

    def goals_in_scene(self, episode_state: Mapping[str, torch.Tensor], goal_ids: torch.Tensor) -> torch.Tensor:
        """bool [E, G]: which goals of ``goal_ids`` [G] name only objects of each episode (its
        episode keys, [E, ...]); HER's ``"scene"`` negatives and twins draw from them."""
        raise self._missing("goals_in_scene", "HER's scene negatives and twins")

    def noop_actions(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """bool [B, A]: the actions certain to change nothing (the no-op twins)."""
        raise self._missing("noop_actions", "no-op twins")

    def goal_attributes(self) -> list[dict[str, str]]:
        """Per goal, the attributes a curriculum may group goals by (besides ``"type"``)."""
        raise self._missing("goal_attributes", "learning-progress groups other than 'type'")

    def subgoal_matrix(self) -> Any:
        """bool [single goals, single goals]: s is a subgoal of g (the aligned-goal filter)."""
        raise self._missing("subgoal_matrix", "the aligned-goal filter")

    def neutral_scene_objects(self, goal: str) -> list[str]:
        """The objects a scene for ``goal`` may hold without letting the goal be achieved: an
        autotelic agent chooses goals and scenes at reset, and needs this for its neutral
        episodes."""
        raise self._missing("neutral_scene_objects", "autotelic goal choice")

    def reset_in_groups(self, env: EnvBase, group_size: int) -> TensorDictBase:
        """Resets every sub-environment of ``env`` (made by :meth:`make_env`), each group of
        ``group_size`` consecutive ones from one start (the same scene and goal, level and mission,
        game and quest), and returns the first observation: GRPO's groups of episodes. GRPO-GLAM's
        training loop also calls the batched environment's ``restart_as(b, source)`` (sub-environment
        ``b`` restarted at the start of ``source``'s episode), which the built-in ones implement."""
        raise self._missing("reset_in_groups", "groups of episodes from one start (GRPO-GLAM)")

    def _missing(self, capability: str, feature: str) -> MissingCapability:
        return MissingCapability(
            f"the {self.name or type(self).__name__!r} environment has no {capability!r}, which "
            f"{feature} need: switch that feature off, or implement {type(self).__name__}.{capability}"
        )

    def has(self, capability: str) -> bool:
        """Whether the environment implements an optional capability (a method of this class)."""
        return getattr(type(self), capability) is not getattr(TextEnvironment, capability)

    def require(self, capability: str, feature: str) -> None:
        """Raises :class:`MissingCapability` now, when ``feature`` is set up, if the environment
        lacks ``capability`` (rather than at the first batch that needs it)."""
        if not self.has(capability):
            raise self._missing(capability, feature)


def step_success(next_state: Any) -> torch.Tensor:
    """bool, the shape of its ``"terminated"``: whether each step is a success, a terminal step with
    a reward (an environment may also end an episode on a failure, with reward 0).
    ``next_state``: a step's ``"next"``."""
    return next_state["terminated"] & (next_state["reward"] > 0)


def require_environment(environment: Any) -> TextEnvironment:
    """``environment`` itself when it is a :class:`TextEnvironment`. The library's objects take the
    environment object, resolved once where a name is given (a config's ``environment``,
    ``get_environment(name)`` at a command line): anything else, a name included, is a
    ``TypeError`` that names the fix."""
    if isinstance(environment, TextEnvironment):
        return environment
    fix = f": pass get_environment({environment!r})" if isinstance(environment, str) else ""
    raise TypeError(f"environment: expected a TextEnvironment{fix}, got {type(environment).__name__}")


__all__ = [
    "EnvironmentFilesError",
    "EnvironmentStateError",
    "GoalCatalogueLike",
    "GoalIndex",
    "MissingCapability",
    "TextEnvironment",
    "require_environment",
    "step_success",
]
