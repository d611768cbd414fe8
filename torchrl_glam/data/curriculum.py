"""Which goal to practise: uniform over the known goals, or a learning-progress (LP) curriculum.

Learning progress (Oudeyer et al. 2007; CURIOUS, Colas et al. 2019; MAGELLAN, Gaven et al. 2025)
is the absolute change of success: for a group of goals, the absolute value of (success rate over its last
``window`` attempts - success rate over the ``window`` attempts before). Goals whose competence is changing,
up or down, are where practice pays. It is estimated per *group* of goals because an agent
attempts each of hundreds of goals too rarely for a per-goal estimate; the goal grammar gives
natural groups (:func:`goal_groups`): goal type, the object category and the colour its
description names. A share ``epsilon`` of the choices is uniform over the known goals, so every
group keeps being tried and a group whose LP is still unknown (fewer than 2 attempts) gets its
first attempts.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torchrl_glam.data.goal_groups import parse_groups
from torchrl_glam.envs import TextEnvironment, require_environment


def goal_groups(
    catalogue, groups: str | Sequence[str], *, environment: TextEnvironment
) -> tuple[torch.Tensor, list[str]]:
    """The group of every catalogue goal, and the groups' names.

    A goal's type is the catalogue's; its other attributes (Playground-Text: the category and
    colour of its last part's description) are the environment's ``goal_attributes``. Returns
    ``group_of`` (int64 [num_goals]) and ``names`` (e.g. "grasp/animal"), indexed by group.
    """
    names = parse_groups(groups)
    if names == ("goal",):
        return torch.arange(len(catalogue)), list(catalogue.goals)
    environment = require_environment(environment)
    goal_types = environment.goal_types
    attributes = None
    if set(names) - {"type"}:
        environment.require("goal_attributes", f"learning-progress groups {','.join(names)!r}")
        attributes = environment.goal_attributes()
    keys = []
    for goal, goal_type in enumerate(catalogue.goal_type.tolist()):
        values = {"type": goal_types[goal_type], **(attributes[goal] if attributes is not None else {})}
        keys.append("/".join(values[n] for n in names))
    group_names = sorted(set(keys))
    index = {k: i for i, k in enumerate(group_names)}
    return torch.tensor([index[k] for k in keys], dtype=torch.int64), group_names


class LearningProgress:
    """Success history and absolute learning progress per group of goals.

    Args:
        group_of (torch.Tensor): int64 [num_goals], the group of each goal (:func:`goal_groups`).
        num_groups (int): the number of groups.
        window (int): attempts per half of the LP window (LP compares the last ``window`` attempts of a
            group with the ``window`` before them).
    """

    def __init__(self, group_of: torch.Tensor, num_groups: int, window: int) -> None:
        if window < 1:
            raise ValueError(f"window={window} must be at least 1 (attempts per half of the LP window)")
        self.group_of, self.num_groups, self.window = group_of, num_groups, window
        self.history: list[list[int]] = [[] for _ in range(num_groups)]  # the last 2*window outcomes
        self.attempts = torch.zeros(num_groups, dtype=torch.int64)
        self.successes = torch.zeros(num_groups, dtype=torch.int64)

    def record(self, goal_ids: torch.Tensor, success: torch.Tensor) -> None:
        """Adds the outcomes (True: the goal was achieved) of finished attempts, in order."""
        for group, ok in zip(self.group_of[goal_ids.reshape(-1)].tolist(), success.reshape(-1).tolist()):
            history = self.history[group]
            history.append(int(ok))
            del history[: -2 * self.window]
            self.attempts[group] += 1
            self.successes[group] += int(ok)

    def progress(self) -> torch.Tensor:
        """float [num_groups]: ``abs(recent success - earlier success)``. With n < 2 * window outcomes,
        the two halves are the last n // 2 outcomes and the n // 2 before them; 0 below 2."""
        lp = torch.zeros(self.num_groups)
        for group, history in enumerate(self.history):
            half = len(history) // 2
            if half:
                recent, earlier = history[-half:], history[-2 * half : -half]
                lp[group] = abs(sum(recent) - sum(earlier)) / half
        return lp

    def recent_success(self) -> torch.Tensor:
        """float [num_groups]: success over the last ``window`` attempts (NaN before any)."""
        out = torch.full((self.num_groups,), float("nan"))
        for group, history in enumerate(self.history):
            if history:
                recent = history[-self.window :]
                out[group] = sum(recent) / len(recent)
        return out

    def state_dict(self) -> dict:
        return {
            "history": [list(h) for h in self.history],
            "attempts": self.attempts.clone(),
            "successes": self.successes.clone(),
            "window": self.window,
        }

    def load_state_dict(self, state: dict) -> None:
        if len(state["history"]) != self.num_groups or state["window"] != self.window:
            raise ValueError(
                f"saved learning progress has {len(state['history'])} groups and window "
                f"{state['window']}; this one {self.num_groups} and {self.window}: resume with the "
                "run's lp_groups and lp_window"
            )
        self.history = [list(h) for h in state["history"]]
        self.attempts, self.successes = state["attempts"].clone(), state["successes"].clone()


def choose_goals(
    candidates: torch.Tensor,
    n: int,
    generator: torch.Generator,
    progress: torch.Tensor | None = None,
    group_of: torch.Tensor | None = None,
    epsilon: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` goals drawn among ``candidates`` (bool [num_goals], at least one True).

    Without ``progress``: uniform over the candidates. With it (float [num_groups], and
    ``group_of``): with probability ``epsilon`` uniform, otherwise a group with probability
    proportional to its LP among the groups holding candidates, then a candidate of that group
    uniformly; uniform too while every such group's LP is 0. Returns the goal ids (int64 [n]) and
    whether each was a uniform draw (bool [n]).
    """
    pool = torch.nonzero(candidates).squeeze(-1)  # draws index the candidates, not the catalogue
    if not len(pool):
        raise ValueError("no candidate goal to choose from: the goal memory is empty")
    goals = pool[torch.randint(len(pool), (n,), generator=generator)]
    uniform = torch.ones(n, dtype=torch.bool)
    if progress is None or n == 0:
        return goals, uniform
    explore = torch.rand(n, generator=generator) < epsilon
    pool_groups = group_of[pool]
    has_candidates = torch.zeros(len(progress), dtype=torch.bool)
    has_candidates[pool_groups] = True
    group_weights = progress * has_candidates
    if float(group_weights.sum()) <= 0:
        return goals, uniform
    groups = torch.multinomial(group_weights, n, replacement=True, generator=generator)
    for i in torch.nonzero(~explore).squeeze(-1).tolist():
        in_group = pool[pool_groups == groups[i]]
        goals[i] = in_group[torch.randint(len(in_group), (1,), generator=generator)[0]]
    return goals, explore
