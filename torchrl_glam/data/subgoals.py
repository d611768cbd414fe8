"""Which goals are sub-goals of a goal: the "aligned" filter of PPO with HER (paper App. G.1).

With HER, PPO's ratio and KL compare the policy for the relabeled goal g' with the behaviour
policy for the original goal g. That is only sensible when the two policies should agree, i.e.
when g' is a *sub-goal* of g: something achieved on the way to g. The paper's examples: "Go to red
lion" for "Grasp red lion"; Grasp goals for Grow goals (growing takes a grasp first); Grow goals
for "Grow ... then ..." goals. Playground-Text has no "Go to" goals, so the rule, over the goal
grammar of :class:`~torchrl_glam.envs.playground.catalogue.GoalCatalogue`, is (g' != g; D, D' are descriptions):

1. ``Grasp D'`` is a sub-goal of ``Grasp D``, and ``Grow D'`` of ``Grow D``, when D' names every
   object D names ("Grasp any animal" of "Grasp red cat"): the event that achieves g achieves g'
   in the same step, whichever object the agent picks.
2. ``Grasp D'`` is a sub-goal of ``Grow D`` when every object D' names is one whose grasp starts a
   way of growing something D names: a supply that grows it (water grows animals and plants, food
   animals only) or the thing itself, carried to a supply. "Grasp any water", "Grasp any supply"
   and "Grasp red cat" are sub-goals of "Grow red cat"; "Grasp red animal" is not (a red lion does
   not help), nor is "Grasp any food" of "Grow red rose".
3. A single goal is a sub-goal of "A then b" when it is A or B or a sub-goal of A or of B
   ("Grow red cat", "Grasp blue door", "Grasp any water" of "Grow red cat then grasp blue door").
4. "A' then b'" is a sub-goal of "A then b" when A' is A or a sub-goal of A, and B' is B or a
   sub-goal of B ("Grow any cat then grasp any door" of "Grow red cat then grasp blue door").

A sequential goal is never a sub-goal of a single goal.

Rules 1 and 2 are the environment's (``TextEnvironment.subgoal_matrix``: Playground-Text's in
``envs/playground/environment.py``); rules 3 and 4 read only the catalogue's ``parts``.
"""

from __future__ import annotations

import numpy as np
import torch

from torchrl_glam.envs import TextEnvironment, require_environment


def single_subgoals(*, environment: TextEnvironment) -> np.ndarray:
    """Rules 1 and 2 over the single goals: bool [S, S], ``[s_sub, s_goal]`` (Playground-Text:
    S = 246), the environment's ``subgoal_matrix`` (its growth rule, not a copy)."""
    environment = require_environment(environment)
    environment.require("subgoal_matrix", "the aligned-goal filter")
    return environment.subgoal_matrix()


def is_subgoal(catalogue, sub_ids, goal_ids, *, environment: TextEnvironment) -> np.ndarray:
    """Whether each ``sub_ids[i]`` is a sub-goal of ``goal_ids[i]`` (rules in the module docstring).

    Both are goal ids (arrays or tensors of one shape, or ints); the result is a bool array.
    """
    sub = np.asarray(sub_ids.cpu() if isinstance(sub_ids, torch.Tensor) else sub_ids, dtype=np.int64)
    goal = np.asarray(goal_ids.cpu() if isinstance(goal_ids, torch.Tensor) else goal_ids, dtype=np.int64)
    sub, goal = np.broadcast_arrays(sub, goal)
    singles = require_environment(environment).subgoal_matrix()
    sub_a, sub_b = catalogue.parts[sub, 0], catalogue.parts[sub, 1]  # single-goal ids, -1: none
    goal_a, goal_b = catalogue.parts[goal, 0], catalogue.parts[goal, 1]
    sub_single, goal_single = sub_b < 0, goal_b < 0
    sb, gb = np.maximum(sub_b, 0), np.maximum(goal_b, 0)  # valid indices; masked by the flags

    def part_of(x, part):  # x is the part or a sub-goal of it
        return (x == part) | singles[x, part]

    single_of_single = sub_single & goal_single & singles[sub_a, goal_a]
    single_of_sequence = sub_single & ~goal_single & (part_of(sub_a, goal_a) | part_of(sub_a, gb))
    sequence_of_sequence = ~sub_single & ~goal_single & (sub != goal) & part_of(sub_a, goal_a) & part_of(sb, gb)
    return single_of_single | single_of_sequence | sequence_of_sequence


def aligned_goal_filter(*, environment: TextEnvironment):
    """A ``keep_goal(goal_ids, relabel_ids)`` for :func:`~torchrl_glam.data.her.relabel_episodes`:
    relabel only with sub-goals of the episode's goal (default environment: Playground-Text)."""
    environment = require_environment(environment)
    environment.require("subgoal_matrix", "the aligned-goal filter")
    catalogue = environment.catalogue

    def keep_goal(goal_ids: torch.Tensor, relabel_ids: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(
            is_subgoal(catalogue, relabel_ids, goal_ids, environment=environment), device=relabel_ids.device
        )

    return keep_goal
