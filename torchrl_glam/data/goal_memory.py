"""The goals an autotelic agent knows: those the social partner has reported to it.

An autotelic agent is never given the goal list. It learns which goals exist from the social
partner's reports (``("next", "achieved_goal_ids")`` / ``("next", "achieved_goal_count")`` of
:class:`~torchrl_glam.envs.playground.PlaygroundTextEnv`), whatever set they belong to: the memory keeps every
reported id, the task set's or not, with the environment step at which it was first reported.
"""

from __future__ import annotations

import torch

from torchrl_glam.envs import ACHIEVED_GOAL_COUNT_KEY, ACHIEVED_GOAL_IDS_KEY

REPORT_KEYS = (("next", ACHIEVED_GOAL_IDS_KEY), ("next", ACHIEVED_GOAL_COUNT_KEY))


class GoalMemory:
    """The discovered goals, as one integer per catalogue goal: the step it was first reported at.

    Args:
        num_goals (int): the size of the goal catalogue (ids index it).

    Attributes:
        first_seen: int64 [num_goals], the environment step of a goal's first report, -1 while it
            is unknown.
    """

    def __init__(self, num_goals: int) -> None:
        self.first_seen = torch.full((num_goals,), -1, dtype=torch.int64)

    def add(self, ids: torch.Tensor, count: torch.Tensor, steps: torch.Tensor | int) -> torch.Tensor:
        """Adds the goals of a batch of reports; returns the ids discovered now (ascending).

        Args:
            ids (torch.Tensor): int [B, K], the reported goal ids, padded (the environment pads with -1).
            count (torch.Tensor): int [B], how many of each row are reports (the rest is padding).
            steps (torch.Tensor | int): the environment step of each row, int [B] (or one int for all rows).
        """
        ids, count = ids.reshape(len(count), -1), count.reshape(-1)
        valid = torch.arange(ids.shape[-1]) < count.unsqueeze(-1)
        steps = torch.as_tensor(steps, dtype=torch.int64).expand(len(count))
        reported, at = ids[valid], steps.unsqueeze(-1).expand_as(ids)[valid]
        if len(reported) and (int(reported.min()) < 0 or int(reported.max()) >= len(self.first_seen)):
            raise ValueError(
                f"reported goal ids must lie in [0, {len(self.first_seen)}) (the catalogue); got "
                f"{reported.min().item()}..{reported.max().item()}: pass the environment's "
                "'achieved_goal_ids' with its 'achieved_goal_count'"
            )
        fresh = self.first_seen[reported] < 0
        reported, at = reported[fresh], at[fresh]
        if not len(reported):
            return reported
        # a goal reported by several rows of the batch: its earliest step
        new = torch.unique(reported)
        first = torch.full_like(self.first_seen, torch.iinfo(torch.int64).max)
        first.scatter_reduce_(0, reported, at, reduce="amin")
        self.first_seen[new] = first[new]
        return new

    @property
    def known(self) -> torch.Tensor:
        """bool [num_goals]: the discovered goals."""
        return self.first_seen >= 0

    def ids(self) -> torch.Tensor:
        """The discovered goal ids, in order of discovery (ties by id)."""
        known = torch.nonzero(self.known).squeeze(-1)
        return known[torch.argsort(self.first_seen[known], stable=True)]

    def __len__(self) -> int:
        return int(self.known.sum())

    def state_dict(self) -> dict:
        return {"first_seen": self.first_seen.clone()}

    def load_state_dict(self, state: dict) -> None:
        first_seen = state["first_seen"]
        if first_seen.shape != self.first_seen.shape:
            raise ValueError(
                f"saved goal memory covers {first_seen.shape[0]} goals, this catalogue "
                f"{self.first_seen.shape[0]}: load it with the catalogue it was saved with"
            )
        self.first_seen = first_seen.clone()
