"""GRPO-GLAM's groups of episodes: each sub-environment plays ``group_size`` episodes in a row from
one start (:class:`RepeatedStarts`, a TorchRL transform on the acting environment), and
:class:`Groups` gathers them into complete groups for the update.

Why one after another rather than ``group_size`` sub-environments in parallel: the harness steps
every sub-environment at every iteration and resets each as soon as its episode ends, so parallel
members would have to idle until the slowest of their group ends. Played in a row, no step is
wasted; a group can straddle an update, and its earlier episodes then carry the log-probabilities
of the policy that played them (the clipped ratio accounts for it, as for any PPO data).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.envs import TextEnvironment, require_environment


class RepeatedStarts(Transform):
    """Restarts each sub-environment at its own episode's start until it has played ``group_size``
    episodes from it, then lets the environment draw a new start (scene and goal, level and
    mission, game and quest).

    Every reset passes through it, the auto-resets of ``step_and_maybe_reset`` included: it takes
    the sub-environments whose group is not complete out of the ``"_reset"`` mask the environment
    sees, restarts them with the environment's ``restart_as(b, b)`` (the capability behind
    ``TextEnvironment.reset_in_groups``) and writes their first observation. A full reset (no mask)
    starts new groups everywhere. Reads ``"_reset"``; writes no key of its own.

    Args:
        num_envs (int): the batch size of the environment it wraps.
        group_size (int): G, the episodes of a group.
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` (or its name) of that
            environment; it must have ``reset_in_groups``.

    Examples:
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl_glam.algorithms.grpo_glam.groups import RepeatedStarts
        >>> from torchrl_glam.envs import get_environment
        >>> playground = get_environment("playground")
        >>> env = TransformedEnv(playground.make_env(2, seed=0), RepeatedStarts(2, 3, environment=playground))
        >>> td = env.reset()
        >>> first = playground.render(td)[0][0]
        >>> td["action"] = td["action_mask"].long().argmax(-1)
        >>> for _ in range(10):  # the episode ends within 10 steps (max_steps); the next starts alike
        ...     _, td = env.step_and_maybe_reset(td)
        >>> env.transform.played.tolist(), playground.render(td)[0][0] == first
        ([1, 1], True)
    """

    def __init__(self, num_envs: int, group_size: int, *, environment: TextEnvironment) -> None:
        super().__init__(in_keys=[], out_keys=[])
        require_environment(environment).require("reset_in_groups", "groups of episodes from one start (GRPO-GLAM)")
        if group_size < 1:
            raise ValueError(f"group_size={group_size}: a group holds at least one episode")
        self.group_size = group_size
        self.played = torch.zeros(num_envs, dtype=torch.long)  # episodes each group in progress has finished
        self._restarting = torch.zeros(0, dtype=torch.long)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is None or "_reset" not in tensordict.keys():  # a full reset: new groups
            self.played.zero_()
            self._restarting = torch.zeros(0, dtype=torch.long)
            return tensordict
        reset = tensordict["_reset"]
        ended = reset.reshape(-1).cpu()
        self.played += ended.long()
        complete = self.played >= self.group_size
        self.played[complete] = 0
        restarting = ended & ~complete
        self._restarting = restarting.nonzero().squeeze(-1)
        tensordict["_reset"] = (ended & complete).reshape(reset.shape).to(reset.device)
        return tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if not len(self._restarting):
            return tensordict_reset
        env = self.parent.base_env
        if not callable(getattr(env, "restart_as", None)):
            raise TypeError(
                f"{type(env).__name__} has no restart_as(b, source), which groups of episodes in a row need: "
                "implement it (restart sub-environment b at the start of source's episode) beside reset_in_groups"
            )
        for b in self._restarting.tolist():
            env.restart_as(b, b)
        observation = env.observation()
        rows = self._restarting.to(tensordict_reset.device)
        for key in tensordict_reset.keys(True, True):
            if key in observation.keys(True, True):
                tensordict_reset.get(key)[rows] = observation.get(key)[rows].to(tensordict_reset.device)
        return tensordict_reset

    def state_dict(self, *args, **kwargs) -> dict:
        """The episodes each sub-environment's group has finished (for checkpoints)."""
        return {"played": self.played.clone()}

    def load_state_dict(self, state: dict, *args, **kwargs) -> None:
        if state["played"].shape != self.played.shape:
            raise ValueError(
                f"the checkpoint's groups are of {state['played'].numel()} sub-environments, this run has "
                f"{self.played.numel()}: resume with the num_envs it ran with"
            )
        self.played = state["played"].clone()


class Groups:
    """The episodes of each sub-environment's group in progress, and the complete groups.

    :meth:`add` takes ``env.step_and_maybe_reset``'s first output ([num_envs], with "next"); the
    episodes it ends join their sub-environment's group, and a group of ``group_size`` episodes
    is complete. :meth:`take` returns the complete groups as one padded episode batch
    [groups x G, max_steps] (each group's episodes consecutive; the keys of
    :class:`~torchrl_glam.data.episodes.EpisodeAssembler`'s episodes, and "sample_log_prob").

    Args:
        num_envs (int): the batch size of the environment.
        group_size (int): G.
        max_steps (int): the episode length limit (the padding length).
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` (or its name) of the
            steps.
    """

    def __init__(self, num_envs: int, group_size: int, max_steps: int, *, environment: TextEnvironment) -> None:
        self.group_size = group_size
        self.assembler = EpisodeAssembler(num_envs, max_steps, environment=environment, extra_keys=("sample_log_prob",))
        self.in_progress: list[list[TensorDictBase]] = [[] for _ in range(num_envs)]
        self.complete: list[TensorDictBase] = []

    def __len__(self) -> int:
        """The complete groups not taken yet."""
        return len(self.complete)

    def add(self, step: TensorDictBase) -> None:
        """Adds one batched step.

        Args:
            step (TensorDictBase): ``env.step_and_maybe_reset``'s first output, [num_envs] with "next" and
                "sample_log_prob".
        """
        episodes = self.assembler.add(step)
        if episodes is None:
            return
        ended = (step["next", "terminated"] | step["next", "truncated"]).reshape(-1).nonzero().squeeze(-1)
        for b, episode in zip(ended.tolist(), episodes.unbind(0), strict=True):
            self.in_progress[b].append(episode)
            if len(self.in_progress[b]) == self.group_size:
                self.complete.append(torch.stack(self.in_progress[b]))
                self.in_progress[b] = []

    def take(self) -> TensorDictBase:
        """Hands over the complete groups.

        Returns:
            The complete groups' episodes [groups x G, max_steps] (each group's consecutive), emptied here.
        """
        groups, self.complete = self.complete, []
        return torch.cat(groups)

    def state_dict(self) -> dict:
        """The episodes in progress, those of the groups in progress, and the complete groups."""
        return {
            "assembler": self.assembler.state_dict(),
            "in_progress": [list(group) for group in self.in_progress],
            "complete": list(self.complete),
        }

    def load_state_dict(self, state: dict) -> None:
        self.assembler.load_state_dict(state["assembler"])
        self.in_progress = [list(group) for group in state["in_progress"]]
        self.complete = list(state["complete"])


__all__ = ["Groups", "RepeatedStarts"]
