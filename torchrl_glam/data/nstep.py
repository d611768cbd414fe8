"""n-step returns computed per finished episode (paper §2.2, App. F).

For step t of an episode of length L, with k = min(n, L - t) steps actually available:

    return  = sum_{i<k} gamma^i r_{t+i}
    target  = return + gamma^k * (1 - done) * V(s_{t+k})

where ``done`` says whether the episode terminated inside the window (then there is nothing to
bootstrap from) and s_{t+k} is the state after the window's last step. At a truncation (time
limit) the window is shorter and the target still bootstraps, with gamma^k; or, with
``bootstrap_time_limit=False``, it ends there as at a terminal (as code with one "done" flag did
before Gymnasium split it): the prompts do not show the time left, so this is not Markov, but it
gives a failed episode's last steps a target of 0.

Why not TorchRL's ``MultiStep`` transform: in torchrl 0.14.1 it does not shift done/terminated
into the window (a step two before a terminal bootstraps from the terminal state) and it empties
non-tensor entries under "next" (checked when this was written). Working on whole episodes makes
the terminal and truncated cases exact by construction; tests cover both.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from torchrl_glam.data.episodes import step_keys
from torchrl_glam.envs import TextEnvironment, require_environment


def nstep_transitions(
    episodes: TensorDictBase,
    n: int,
    gamma: float,
    bootstrap_time_limit: bool = True,
    *,
    environment: TextEnvironment,
) -> TensorDict:
    """n-step transitions of a padded episode batch [E, T] (see ``episodes.py``), flattened to [M]
    over the episodes' real steps.

    Output keys: the acting state (the ``environment``'s ``state_keys``; Playground-Text's by
    default), "action", "relabeled", "collected_at"; under "next": the state after the window (its
    ``step_keys``), "reward" (the n-step return), "terminated" and "done" (terminal inside the window);
    at the root "steps_to_next_obs" (k): TorchRL's value estimators (``TD0Estimator``, used by
    ``DiscreteSACLoss``) read it and bootstrap with gamma ** k. Reward, done and terminated are
    [M, 1], as TorchRL's losses expect. ``bootstrap_time_limit=False``: a truncation inside the
    window counts as a terminal.
    """
    if n < 1:
        raise ValueError(f"n-step n={n} must be at least 1")
    E, T = episodes.shape
    mask = episodes["mask"]
    length = mask.sum(-1, keepdim=True)  # [E, 1]
    t = torch.arange(T).expand(E, T)
    k = torch.clamp(length - t, max=n).clamp(min=1)  # steps in each window
    last = (t + k - 1).clamp(max=T - 1)  # the window's last step

    reward = episodes["next", "reward"].float()
    ret = torch.zeros(E, T)
    for i in range(n):
        step = (t + i).clamp(max=T - 1)
        inside = (i < k).float()
        ret += (gamma**i) * inside * reward.gather(1, step)
    ended = episodes["next", "terminated"]
    if not bootstrap_time_limit:
        ended = ended | episodes["next", "truncated"]
    terminated = ended.gather(1, last)

    def at_last(value: torch.Tensor) -> torch.Tensor:
        index = last.reshape(E, T, *([1] * (value.dim() - 2))).expand_as(value)
        return value.gather(1, index)

    out = TensorDict(
        {key: episodes[key] for key in (*step_keys(environment=environment), "relabeled", "collected_at")},
        batch_size=[E, T],
    )
    for key in require_environment(environment).step_keys:
        out["next", key] = at_last(episodes["next", key])
    out["next", "reward"] = ret.unsqueeze(-1)
    out["next", "terminated"] = terminated.unsqueeze(-1)
    out["next", "done"] = terminated.unsqueeze(-1).clone()
    # TorchRL's name for k: its TD estimators then bootstrap with gamma ** steps_to_next_obs
    out["steps_to_next_obs"] = k
    return out[mask]


class NStepReturns(TensorDictModuleBase):
    """:func:`nstep_transitions` as a TensorDict module: episode batch [E, T] -> transitions [M]."""

    def __init__(
        self,
        n: int = 3,
        gamma: float = 0.99,
        bootstrap_time_limit: bool = True,
        *,
        environment: TextEnvironment,
    ) -> None:
        super().__init__()
        self.environment = require_environment(environment)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma={gamma} must be in [0, 1]")
        self.n, self.gamma, self.bootstrap_time_limit = n, gamma, bootstrap_time_limit
        self.in_keys = ["mask", ("next", "reward"), ("next", "terminated"), ("next", "truncated")]
        self.out_keys = [("next", "reward"), ("next", "done"), ("next", "terminated"), "steps_to_next_obs"]

    def forward(self, episodes: TensorDictBase) -> TensorDict:
        return nstep_transitions(episodes, self.n, self.gamma, self.bootstrap_time_limit, environment=self.environment)
