"""Finished episodes, gathered from batched environment steps, as padded tensors.

An episode batch is a TensorDict of batch size [E, T] (E episodes padded to T = max_steps steps)
holding tensors only, the compact state of a
:class:`~torchrl_glam.envs.protocol.TextEnvironment` (Playground-Text's in the examples):

========================================== ==================================================
key                                        meaning
========================================== ==================================================
the ``state_keys`` ("goal_id", "objects",  the state a step acted in (objects: [E, T, N])
"agent_on", "held", "grown"), "action"
("next", ``step_keys``: "agent_on" /       the state after the step
"held" / "grown")
("next", "reward" / "terminated" /         what the step returned ([E, T], no trailing 1)
"truncated")
("next", "achieved_goal_ids" /             the social partner's reports at the step
"achieved_goal_count")
"mask"                                     [E, T] True on the episode's steps
"collected_at"                             [E, T] global environment step of the transition
"relabeled"                                [E, T] hindsight-relabeled copy (see ``her.py``)
========================================== ==================================================

Episodes are kept whole until they end because n-step returns and hindsight relabeling both need
the steps after a transition (see ``nstep.py`` and ``her.py``). On-policy rollouts [B, T] (PPO)
are cut into the same padded layout by :func:`rollout_episodes`.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_glam.envs import (
    ACHIEVED_GOAL_COUNT_KEY,
    ACHIEVED_GOAL_IDS_KEY,
    TextEnvironment,
    require_environment,
    step_success,
)

#: what a step returned besides the next state: zero on a padded step (nothing happened there)
EVENT_KEYS = ("reward", "terminated", "truncated", ACHIEVED_GOAL_COUNT_KEY)
#: what a step returned, under "next", besides the environment's step keys
RETURNED_KEYS = ("reward", "terminated", "truncated", ACHIEVED_GOAL_IDS_KEY, ACHIEVED_GOAL_COUNT_KEY)


def step_keys(*, environment: TextEnvironment) -> tuple[str, ...]:
    """The keys of an episode step at its root: the compact state and "action"."""
    return require_environment(environment).state_keys + ("action",)


def next_keys(*, environment: TextEnvironment) -> tuple[str, ...]:
    """The keys of an episode step under "next": the next state and what the step returned."""
    return require_environment(environment).step_keys + RETURNED_KEYS


def episode_success(episodes: TensorDictBase) -> torch.Tensor:
    """bool [E]: whether each episode ended on a success (:func:`step_success`)."""
    return step_success(episodes["next"]).any(-1)


class EpisodeAssembler:
    """Collects the steps of ``num_envs`` sub-environments and returns the episodes that ended.

    Feed it the output of ``env.step`` (or ``env.step_and_maybe_reset``'s first output) at every
    step; :meth:`add` returns the finished episodes as a padded batch (or ``None``).

    Args:
        num_envs (int): the batch size of the environment.
        max_steps (int): the episode length limit (the padding length T).
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` (or its name) of the
            steps, for its state keys.
        extra_keys (tuple[str, ...]): keys of a step kept beside the state and the action (e.g. "sample_log_prob"
            for an on-policy update).
    """

    def __init__(
        self, num_envs: int, max_steps: int, *, environment: TextEnvironment, extra_keys: tuple[str, ...] = ()
    ) -> None:
        self.num_envs, self.max_steps = num_envs, max_steps
        self.step_keys = step_keys(environment=environment) + tuple(extra_keys)
        self.next_keys = next_keys(environment=environment)
        self._steps: list[list[TensorDictBase]] = [[] for _ in range(num_envs)]
        self.env_steps = 0  # global counter of sub-environment steps

    def add(self, step: TensorDictBase) -> TensorDictBase | None:
        """Adds one batched step ([num_envs], with "next"); returns the episodes it ended."""
        flat = self._flatten(step)
        done = flat["next", "terminated"] | flat["next", "truncated"]
        for b in range(self.num_envs):
            self._steps[b].append(flat[b])
        self.env_steps += self.num_envs
        ended = done.nonzero().squeeze(-1).tolist()
        if not ended:
            return None
        episodes = [self._pad(torch.stack(self._steps[b])) for b in ended]
        for b in ended:
            self._steps[b] = []
        return torch.stack(episodes)

    def state_dict(self) -> dict:
        """The episodes in progress (for checkpoints)."""
        return {"steps": [list(steps) for steps in self._steps], "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        saved = next((steps[0] for steps in state["steps"] if steps), None)
        if saved is not None:
            missing = [k for k in self.step_keys if k not in saved.keys()]
            missing += [("next", k) for k in self.next_keys if ("next", k) not in saved.keys(True)]
            if missing:  # steps recorded by an earlier version of the environment's compact state
                raise ValueError(f"its episodes in progress lack {missing}, which this environment's steps now hold")
        self._steps = [list(steps) for steps in state["steps"]]
        self.env_steps = state["env_steps"]

    def _flatten(self, step: TensorDictBase) -> TensorDict:
        out = TensorDict({k: step[k] for k in self.step_keys}, batch_size=step.batch_size)
        for k in self.next_keys:
            value = step["next", k]
            out["next", k] = value.squeeze(-1) if k in ("reward", "terminated", "truncated") else value
        out["collected_at"] = torch.arange(self.num_envs) + self.env_steps
        return out

    def _pad(self, episode: TensorDict) -> TensorDict:
        """[length] steps -> [max_steps], repeating the last step; "mask" marks the real ones, and
        padded steps carry no reward, terminal nor report."""
        length = episode.shape[0]
        if length < self.max_steps:
            episode = torch.cat([episode, episode[-1:].expand(self.max_steps - length)])
        episode = episode.clone()
        mask = torch.arange(self.max_steps) < length
        episode["mask"] = mask
        episode["relabeled"] = torch.zeros(self.max_steps, dtype=torch.bool)
        for k in EVENT_KEYS:
            value = episode["next", k]
            episode["next", k] = torch.where(mask, value, torch.zeros_like(value))
        return episode


def rollout_episodes(rollout: TensorDictBase, max_steps: int) -> TensorDictBase:
    """The episode pieces of a rollout [B, T] (time last) as a padded batch [E, max_steps].

    A piece is a run of one sub-environment's steps within one episode: it ends at a ("next",
    "done") step or at the end of the rollout, and begins after a done or at the start of the
    rollout. Pieces are padded by repeating their last step; "mask" is True on their steps. The
    rollout's keys keep their layout (no squeeze), in row order then time order.
    """
    B, T = rollout.shape
    done = rollout["next", "done"].reshape(B, T)
    steps = torch.arange(T).expand(B, T)
    starts = torch.ones_like(done)
    starts[:, 1:] = done[:, :-1]
    piece = starts.long().cumsum(1) - 1  # piece number within its row
    per_row = piece[:, -1] + 1
    piece = piece + (per_row.cumsum(0) - per_row)[:, None]  # global piece number, [B, T]
    num_pieces = int(per_row.sum())
    length = torch.bincount(piece.reshape(-1), minlength=num_pieces)
    if int(length.max()) > max_steps:
        raise ValueError(
            f"a rollout piece has {int(length.max())} steps, more than max_steps={max_steps}: "
            "pass the environment's max_steps"
        )
    first = torch.zeros(num_pieces, dtype=torch.long)
    first[piece[starts]] = (steps + T * torch.arange(B)[:, None])[starts]  # flat index of each first step
    positions = torch.arange(max_steps)
    index = first[:, None] + torch.minimum(positions, length[:, None] - 1)
    pieces = rollout.reshape(-1)[index]
    pieces["mask"] = positions < length[:, None]
    return pieces
