"""The steps PPO-GLAM collected since its last update (:class:`Rollout`), and the goals reported
before them (hindsight relabeling of a rollout needs both)."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_glam.envs import ACHIEVED_GOAL_COUNT_KEY, ACHIEVED_GOAL_IDS_KEY, TextEnvironment, require_environment
from torchrl_glam.objectives.ppo_glam import BEHAVIOUR_SCORES_KEY

#: What a rollout keeps of each environment step besides the environment's compact state (its
#: ``state_keys``, and its ``step_keys`` under "next"): what acting recorded, and under "next" what
#: GAE and hindsight relabeling need.
ROLLOUT_KEYS = ("action", "sample_log_prob", BEHAVIOUR_SCORES_KEY)
ROLLOUT_NEXT_KEYS = ("reward", "done", "terminated", "truncated", ACHIEVED_GOAL_IDS_KEY, ACHIEVED_GOAL_COUNT_KEY)


class Rollout:
    """The steps collected since the last update; full after ``length`` steps.

    :meth:`add` takes ``env.step_and_maybe_reset``'s first output ([num_envs], with "next") and
    returns the whole rollout [num_envs, length] (time last) once it is full, else ``None``. It
    also follows the goals each sub-environment's episode in progress has reported: after a full
    rollout (until the next :meth:`add`), :attr:`reported_before` (bool [num_envs, goals]) holds
    those reported before it began, which hindsight relabeling of an episode cut by the rollout's
    start must not relabel again.
    """

    def __init__(self, length: int, *, environment: TextEnvironment) -> None:
        self.length = length
        self.steps: list[TensorDict] = []
        environment = require_environment(environment)
        self.num_goals = len(environment.catalogue)
        self.keys = (
            *environment.state_keys,
            *ROLLOUT_KEYS,
            *(("next", k) for k in (*environment.step_keys, *ROLLOUT_NEXT_KEYS)),
        )
        self.reported: torch.Tensor | None = None  # [num_envs, goals], up to the last step added
        self.reported_before: torch.Tensor | None = None  # the same when the rollout began

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, step: TensorDictBase) -> TensorDictBase | None:
        kept = step.select(*self.keys).clone()
        if self.reported is None:
            self.reported = torch.zeros(kept.shape[0], self.num_goals, dtype=torch.bool)
        if not self.steps:
            self.reported_before = self.reported.clone()
        self._follow_reports(kept["next"])
        self.steps.append(kept)
        if len(self.steps) < self.length:
            return None
        rollout = torch.stack(self.steps, dim=1).contiguous()
        self.steps = []
        return rollout

    def _follow_reports(self, nxt: TensorDictBase) -> None:
        ids, count = nxt[ACHIEVED_GOAL_IDS_KEY].cpu(), nxt[ACHIEVED_GOAL_COUNT_KEY].cpu().reshape(-1)
        slots = torch.arange(ids.shape[-1]) < count.unsqueeze(-1)
        rows = torch.arange(len(ids)).unsqueeze(-1).expand_as(ids)
        self.reported[rows[slots], ids[slots]] = True
        self.reported[nxt["done"].cpu().reshape(-1)] = False  # the next step begins a new episode

    def state_dict(self) -> dict:
        """The steps of the rollout in progress and the goals reported in the episodes in progress
        (for checkpoints)."""
        return {"steps": list(self.steps), "reported": self.reported, "reported_at_start": self.reported_before}

    def load_state_dict(self, state: dict) -> None:
        self.steps = list(state["steps"])
        # checkpoints of 0.1.0 lack them: relabeling then ignores the reports made before the resume
        self.reported, self.reported_before = state.get("reported"), state.get("reported_at_start")
