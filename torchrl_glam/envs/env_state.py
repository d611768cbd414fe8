"""Checkpoints of the batched text environments: their state as plain data beside ``nn.Module``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase


class PlainEnvState:
    """Mixin of an ``EnvBase`` whose state a checkpoint keeps: ``state_dict`` / ``load_state_dict``
    with ``nn.Module``'s signatures (TorchRL's ``EnvCreator``, used by ``ParallelEnv(lambda: ...)``,
    calls them with ``strict=False``), holding the module's own tensors plus :meth:`_env_state`
    under plain keys, as tensors and plain data so that ``torch.load(weights_only=True)`` reads it
    back; and :meth:`observation`, the current observation after a load.

    A subclass names its keys in ``_ENV_STATE`` and implements :meth:`_env_state`,
    :meth:`_load_env_state` and ``_observation()``."""

    _ENV_STATE: tuple[str, ...] = ()

    def _step_each(self, action) -> TensorDictBase:
        """The batched step of sub-environments stepped one at a time by ``self._step_one(b,
        action) -> (reward, terminated, truncated)``: the observation after it, with the reward and
        the done flags."""
        results = np.array([self._step_one(b, int(a)) for b, a in enumerate(action)], dtype=np.float64)
        results = results.reshape(self.num_envs, 3)
        out = self._observation()
        out.set("reward", torch.as_tensor(results[:, 0], dtype=torch.float32, device=self.device).unsqueeze(-1))
        terminated = torch.as_tensor(results[:, 1] > 0, device=self.device).unsqueeze(-1)
        truncated = torch.as_tensor(results[:, 2] > 0, device=self.device).unsqueeze(-1)
        out.update({"terminated": terminated, "truncated": truncated, "done": terminated | truncated})
        return out

    def _env_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_env_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        state = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        state.update({prefix + key: value for key, value in self._env_state().items()})
        return state

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        module_state = {k: v for k, v in state_dict.items() if k not in self._ENV_STATE}
        missing = [k for k in self._ENV_STATE if k not in state_dict]
        if missing and strict:
            raise KeyError(
                f"environment state without {missing}: pass the output of {type(self).__name__}.state_dict()"
            )
        if not missing:
            self._load_env_state({k: state_dict[k] for k in self._ENV_STATE})
            self._observation()  # the action spec's mask follows the restored state
        return super().load_state_dict(module_state, strict=strict, assign=assign)

    def observation(self) -> TensorDictBase:
        """The current observation of every sub-environment (e.g. after :meth:`load_state_dict`)."""
        out = self._observation()
        done = torch.zeros(self.num_envs, 1, dtype=torch.bool, device=self.device)
        out.update({"done": done, "terminated": done.clone(), "truncated": done.clone()})
        return out


class ReplayedEpisodes(PlainEnvState):
    """A :class:`PlainEnvState` whose checkpoint holds the sampler's generator and, per
    sub-environment, how its episode started (plain data: ``self._episodes[b]``) and the actions
    taken since (``self._actions[b]``): loading restarts each episode and replays its actions, so
    a run resumes exactly without pickling the simulator. A subclass implements
    :meth:`_replay_episode`."""

    _ENV_STATE = ("rng", "seed", "episodes", "actions")

    def _replay_episode(self, b: int, episode: list, actions: list) -> None:
        """Restarts sub-environment ``b`` as ``episode`` says and replays ``actions`` (raising a
        ValueError for an episode this environment cannot have)."""
        raise NotImplementedError

    def restart_as(self, b: int, source: int) -> None:
        """Restarts sub-environment ``b`` at the start of sub-environment ``source``'s episode (its
        level or game, and goal), no action taken: a group of episodes from one start."""
        self._replay_episode(b, list(self._episodes[source]), [])

    def _env_state(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "seed": self.seed_value,
            "episodes": [list(e) for e in self._episodes],
            "actions": [list(a) for a in self._actions],
        }

    def _load_env_state(self, state: dict[str, Any]) -> None:
        episodes, actions = state["episodes"], state["actions"]
        if len(episodes) != self.num_envs or len(actions) != self.num_envs:
            raise ValueError(
                f"the state holds {len(episodes)} sub-environments, this environment "
                f"{self.num_envs}: build it with num_envs={len(episodes)}"
            )
        for b, (episode, taken) in enumerate(zip(episodes, actions, strict=True)):
            self._replay_episode(b, episode, taken)
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self.seed_value = state["seed"]


def reset_in_groups(env, group_size: int) -> TensorDictBase:
    """Resets every sub-environment of ``env`` (one with ``restart_as(b, source)``), then restarts
    each group of ``group_size`` consecutive sub-environments at its first one's start; the first
    observation. The environments' ``TextEnvironment.reset_in_groups``."""
    if group_size < 1 or env.num_envs % group_size:
        raise ValueError(
            f"groups of {group_size} episodes do not divide {env.num_envs} sub-environments: make num_envs a "
            "multiple of the group size"
        )
    env.reset()
    for b in range(env.num_envs):
        if b % group_size:
            env.restart_as(b, b - b % group_size)
    return env.observation()
