"""Playground-Text behind :class:`~torchrl_glam.envs.protocol.TextEnvironment`: the registered
environment ``"playground"``, with every optional capability (its grammar names objects, so HER's
scene negatives, the aligned-goal filter, curricula by category and colour, the autotelic agent
and the no-op twins all apply).

Importing it loads no torch: a config is checked against :class:`PlaygroundText`'s metadata before
torch and TorchRL load, which the methods that build or compute import."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from torchrl_glam.envs.options import EnvOption
from torchrl_glam.envs.playground.catalogue import GOAL_SETS, GOAL_TYPES, GoalCatalogue
from torchrl_glam.envs.playground.render import render_batch
from torchrl_glam.envs.playground.rules import STATE_KEYS, STEP_STATE_KEYS, action_mask_from_held, feeds
from torchrl_glam.envs.playground.vocabulary import CATEGORIES, COLOURS, OBJECT_NAMES, category_of, vocabulary_words
from torchrl_glam.envs.protocol import TextEnvironment

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase
    from torchrl.envs import EnvBase

    from torchrl_glam.envs.playground.torchrl_env import PlaygroundTextEnv


#: How its offline tiny models are pretrained (``torchrl_glam.offline.recipes``, declared in the
#: entry-point group "torchrl_glam.transcript_recipes"): both scene sizes, half each; the shipped
#: weights keep the names and recipes they had before there were other environments.
TRANSCRIPT_RECIPE = {"goal_sets": ("simplified", "train"), "hindsight": True, "unsuffixed": True}


class PlaygroundText(TextEnvironment):
    """Playground-Text (docs/site/playground_text_spec.md); ``catalogue``: its goals (the shared
    one by default)."""

    name = "playground"
    episode_keys = STATE_KEYS[:2]
    step_keys = STEP_STATE_KEYS
    goal_types = GOAL_TYPES
    goal_type_sampling = True
    goal_sets = GOAL_SETS
    held_out_goal_set = "held_out"
    options = (
        EnvOption(
            "num_objects",
            int | None,
            None,
            'objects per scene; None: 6, or 3 for "simplified"',
            minimum=2,
            maximum=len(OBJECT_NAMES),
        ),
    )
    #: every object name a scene may hold, indexed by the ids of "objects"
    object_names = OBJECT_NAMES

    def __init__(self, catalogue: GoalCatalogue | None = None) -> None:
        self._catalogue = catalogue

    @property
    def catalogue(self) -> GoalCatalogue:
        return self._catalogue or GoalCatalogue.default()

    def make_env(
        self,
        num_envs: int,
        seed: int | None = None,
        goals: str | None = None,
        max_steps: int | None = None,
        goal_sampling: str = "uniform",
        **options,
    ) -> PlaygroundTextEnv:
        """``options``: ``num_objects``, ``reported_goals``, ... of :class:`PlaygroundTextEnv`."""
        from torchrl_glam.envs.playground.torchrl_env import PlaygroundTextEnv

        extra = {"max_steps": max_steps} if max_steps is not None else {}
        return PlaygroundTextEnv(
            num_envs=num_envs,
            goals=goals or "train",
            seed=seed,
            text=False,
            goal_sampling=goal_sampling,
            catalogue=self._catalogue,
            **extra,
            **options,
        )

    def num_actions(self, env: EnvBase) -> int:
        return env.num_objects + 2

    def render(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[list[str]]]:
        return render_batch(*(state[k] for k in STATE_KEYS), catalogue=self.catalogue)

    def action_mask(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return action_mask_from_held(state["held"], state["objects"].shape[-1] + 2)

    def vocabulary_words(self) -> list[str]:
        return vocabulary_words()

    def transcript_targets(self, steps: Mapping[str, torch.Tensor], candidates: list[list[str]]) -> list[str]:
        """The chosen candidate, then where the agent is, what it holds and what has grown, then
        the social partner's reports: "Go to red cat : You are on: red cat , You are holding:
        nothing , You have grown: nothing : nothing"."""
        nxt, goals = steps["next"], self.catalogue.goals
        targets = []
        for b, (objects, chosen) in enumerate(zip(steps["objects"].tolist(), steps["action"].tolist())):
            names = [self.object_names[i] for i in objects]
            on, held = int(nxt["agent_on"][b]), int(nxt["held"][b])
            grown = [n for n, g in zip(names, nxt["grown"][b].tolist()) if g]
            reports = [goals[g] for g in nxt["achieved_goal_ids"][b, : int(nxt["achieved_goal_count"][b])].tolist()]
            targets.append(
                f"{candidates[b][chosen]} : You are on: {names[on] if on >= 0 else 'nothing'} , "
                f"You are holding: {names[held] if held >= 0 else 'nothing'} , "
                f"You have grown: {', '.join(grown) if grown else 'nothing'} : "
                f"{', '.join(reports) if reports else 'nothing'}"
            )
        return targets

    def episode_metrics(self, episodes: TensorDictBase) -> dict[str, tuple[float, int]]:
        """The share of "Go to" repeats, of no-op steps and of each kind of action."""
        metrics = {}
        # "Go to" the object the agent already stands on: the action greedy cycles repeat. It does
        # nothing, except a first contact of a held supply with that object.
        steps = episodes["mask"]
        repeats = (episodes["action"] == episodes["agent_on"]) & steps
        metrics["repeat_go_to_share"] = (repeats.sum().item(), int(steps.sum()))
        # What a collapsed policy does: steps that
        # change nothing (a repeat "Go to", a Grasp with full hands or on nothing, a Release of
        # nothing), and the kind of action taken. Padding steps past an episode's end do not count.
        unchanged = (episodes["next", "grown"] == episodes["grown"]).all(-1)
        for key in ("agent_on", "held"):
            unchanged &= episodes["next", key] == episodes[key]
        metrics["no_op_share"] = ((unchanged & steps).sum().item(), int(steps.sum()))
        num_objects = episodes["objects"].shape[-1]
        kinds = {
            "go_to": episodes["action"] < num_objects,
            "grasp": episodes["action"] == num_objects,
            "release": episodes["action"] == num_objects + 1,
        }
        for kind, chosen in kinds.items():
            metrics[f"action_share/{kind}"] = ((chosen & steps).sum().item(), int(steps.sum()))
        return metrics

    def goals_in_scene(self, episode_state: Mapping[str, torch.Tensor], goal_ids: torch.Tensor) -> torch.Tensor:
        """A single goal names an object of the scene when the social partner would report it for
        an event on that object (a grasp, or a grow of a living thing); a sequential goal when
        both its parts do."""
        import torch

        catalogue = self.catalogue
        in_scene = _singles_of_objects(catalogue)[episode_state["objects"]].any(dim=1)  # [E, num_single]
        parts = torch.from_numpy(catalogue.parts)[goal_ids]  # [G, 2], -1: no second part
        return in_scene[:, parts[:, 0]] & ((parts[:, 1] < 0) | in_scene[:, parts[:, 1].clamp(min=0)])

    def reset_in_groups(self, env: Any, group_size: int) -> TensorDictBase:
        """Each group of ``group_size`` sub-environments from one start: the same scene and goal."""
        from torchrl_glam.envs.env_state import reset_in_groups

        return reset_in_groups(env, group_size)

    def noop_actions(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return noop_actions(state["agent_on"], state["held"], state["objects"].shape[-1])

    def goal_attributes(self) -> list[dict[str, str]]:
        """A goal's category and colour are those of its last part's description (the B of "A
        then b", whose type already separates it from single goals)."""
        return _goal_attributes(self.catalogue)

    def subgoal_matrix(self) -> np.ndarray:
        return single_subgoals(self.catalogue)

    def neutral_scene_objects(self, goal: str) -> list[str]:
        """The objects a scene for ``goal`` may hold without letting the goal be achieved (the
        autotelic agent's neutral episodes)."""
        catalogue = self.catalogue
        excluded = {
            n
            for part in catalogue.parts[catalogue.id_of(goal)]
            if part >= 0
            for n in catalogue.matching_objects(catalogue.single_part_descriptions[part][1])
        }
        return [n for n in OBJECT_NAMES if n not in excluded]


@functools.cache
def _singles_of_objects(catalogue: GoalCatalogue) -> torch.Tensor:
    """bool [objects, single goals]: the single goals the social partner reports for an event on
    each object (a grasp; a grow too for a living thing)."""
    import torch

    singles = torch.zeros(len(OBJECT_NAMES), catalogue.num_single, dtype=torch.bool)
    for o, name in enumerate(OBJECT_NAMES):
        descriptions = catalogue.object_descriptions[o]
        singles[o, catalogue.grasp_goal_of[descriptions]] = True
        if name.split(" ")[1] in CATEGORIES["living_thing"]:
            grown = catalogue.grow_goal_of[descriptions]
            singles[o, grown[grown >= 0]] = True
    return singles


def noop_actions(agent_on: torch.Tensor, held: torch.Tensor, num_objects: int) -> torch.Tensor:
    """bool [M, num_objects + 2]: the candidate actions that change nothing in each state (``agent_on``,
    ``held`` [M]: object slots, -1 for nothing). Every state has one: "Grasp" or "Release"."""
    import torch

    M = len(agent_on)
    noop = torch.zeros(M, num_objects + 2, dtype=torch.bool)
    on = (agent_on >= 0).nonzero().squeeze(-1)
    noop[on, agent_on[on]] = True  # "Go to" the object underfoot (never the held one: it is not underfoot)
    noop[:, num_objects] = (held >= 0) | (agent_on < 0)  # "Grasp": hand full, or nothing to pick up
    noop[:, num_objects + 1] = held < 0  # "Release": nothing held
    return noop


def _description_attributes(description: str) -> dict[str, str]:
    """The category and colour a description names; "any" when it names none ("any red thing":
    no category; "any cat": no colour)."""
    words = description.split(" ")
    colour = words[0] if words[0] in COLOURS else (words[1] if len(words) == 3 else "any")
    noun = words[-1]
    category = "any" if noun == "thing" else noun if noun in CATEGORIES else category_of(noun)
    return {"category": category, "colour": colour}


@functools.lru_cache(maxsize=4)
def _goal_attributes(catalogue: GoalCatalogue) -> list[dict[str, str]]:
    parts = catalogue.parts
    last = np.where(parts[:, 1] >= 0, parts[:, 1], parts[:, 0])  # B of "A then b", or the goal
    per_single = [_description_attributes(d) for _, d in catalogue.single_part_descriptions]
    return [per_single[part] for part in last.tolist()]


@functools.lru_cache(maxsize=4)
def single_subgoals(catalogue: GoalCatalogue) -> np.ndarray:
    """Rules 1 and 2 of ``torchrl_glam.data.subgoals`` over the single goals: bool [S, S],
    ``[s_sub, s_goal]`` (S = 246)."""
    num_objects = len(OBJECT_NAMES)
    names = np.zeros((len(catalogue.descriptions), num_objects), dtype=bool)  # description -> objects
    for obj, descriptions in enumerate(catalogue.object_descriptions):
        names[descriptions, obj] = True
    living = np.array([n.split(" ")[1] in CATEGORIES["living_thing"] for n in OBJECT_NAMES])
    is_grow = catalogue.single_is_grow
    # the objects whose event achieves each single goal (Grow: living things only)
    targets = names[catalogue.single_description] & np.where(is_grow[:, None], living, True)
    everything = np.arange(num_objects)
    grows = feeds(everything[:, None], everything[None, :])  # [supply, living]: the environment's rule
    # rule 2: the objects whose grasp starts a way of growing a target: its supplies, or itself
    useful = targets | ((targets.astype(np.int64) @ grows.T.astype(np.int64)) > 0)

    def within(inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
        """[i, j]: every object of inner[i] is in outer[j]."""
        return ~((inner[:, None, :] & ~outer[None, :, :]).any(-1))

    same_verb = is_grow[:, None] == is_grow[None, :]
    rule1 = same_verb & within(targets, targets).T  # goal's targets within the sub-goal's
    rule2 = ~is_grow[:, None] & is_grow[None, :] & within(targets, useful)
    out = rule1 | rule2
    np.fill_diagonal(out, False)
    return out


__all__ = ["PlaygroundText", "noop_actions", "single_subgoals"]
