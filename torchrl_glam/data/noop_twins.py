"""No-op twins: beside each success, the same state with a step that changes nothing first.

One step from its goal a trained SAC-GLAM critic can value the winning action and an action that
changes nothing almost alike, and a greedy policy then loops on such a step. Its targets
for the two come from the replay: the winner's is exactly 1, the no-op's bootstraps from the
critic's own value of the same state, so nothing in them anchors the difference.

A no-op twin anchors it with data the environment would produce. For every success in a padded
episode batch (an episode's own, or a hindsight-relabeled section's) that ends at step t, the twin
is the two-step piece of the episode in which the agent, at step t, first took a step that changes
nothing and then the winning action: (s_t, no-op, reward 0, s_t), then (s_t, winner, reward 1,
terminal). Its n-step target for the no-op is gamma exactly, against 1 for the winner, with no
bootstrap. No-ops are read from the state (``rules.py``'s step): "Go to" the object the agent is
on (any contact with the held object happened when it got there), "Grasp" with a full hand or
nothing underfoot, "Release" with an empty hand (the environment's ``noop_actions``: an optional
capability of the protocol, Playground-Text's in ``envs/playground/environment.py``). A success at the episode's
last allowed step has
no twin: one step later the time limit ends the episode first. ``tests/data/test_noop_twins.py``
replays the twins in the environment.

Not in the paper (an option, ``noop_twins``). TorchRL has no transform that inserts steps into
stored episodes, hence this one.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from torchrl_glam.data.episodes import EVENT_KEYS
from torchrl_glam.envs import TextEnvironment, require_environment, step_success


def successes(episodes: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
    """(``e``, ``t``) [M] each: the episodes of a padded batch [E, T] that end with a success, and
    their last step."""
    last = episodes["mask"].sum(-1) - 1
    rows = torch.arange(episodes.shape[0])
    won = step_success(episodes["next"])[rows, last]
    e = won.nonzero().squeeze(-1)
    return e, last[e]


def noop_twins(
    episodes: TensorDictBase, generator: torch.Generator | None = None, *, environment: TextEnvironment
) -> TensorDictBase:
    """The no-op twins [M, T] of a padded episode batch [E, T] (see the module docstring): one per
    success that ends before the last step, its no-op drawn uniformly among the state's; two real
    steps, then padding as ``EpisodeAssembler`` pads. Marked ``relabeled``.

    Examples:
        >>> import torch
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl_glam.data.episodes import rollout_episodes
        >>> from torchrl_glam.data.noop_twins import noop_twins
        >>> from torchrl_glam.envs import PartialResetActionMask, get_environment
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> env = TransformedEnv(
        ...     PlaygroundTextEnv(num_envs=16, goals="simplified", seed=0, text=False), PartialResetActionMask()
        ... )
        >>> _ = torch.manual_seed(0)
        >>> episodes = rollout_episodes(env.rollout(10, break_when_any_done=False), max_steps=10)  # random play
        >>> twins = noop_twins(episodes, torch.Generator().manual_seed(0), environment=get_environment("playground"))
        >>> twins.shape[1], twins["mask"][0].tolist()[:3]  # two real steps, then padding
        (10, [True, True, False])
        >>> twins["next", "reward"][:, :2, 0].unique(dim=0).tolist()  # the no-op: 0, then the winner: 1
        [[0.0, 1.0]]
    """
    T = episodes.shape[1]
    e, t = successes(episodes)
    keep = t + 1 < T  # the winner, one step later, still comes before the time limit
    e, t = e[keep], t[keep]
    if not len(e):
        return episodes[:0].clone()
    winner = episodes[e, t]  # [M]: the winning step, as stored
    padding = winner.clone()  # the winning step with nothing happening at it
    for key in EVENT_KEYS:
        padding["next", key] = torch.zeros_like(winner["next", key])
    noop = padding.clone()
    environment = require_environment(environment)
    choices = environment.noop_actions({k: winner[k] for k in environment.state_keys})
    noop["action"] = torch.multinomial(choices.float(), 1, generator=generator).squeeze(-1)
    for key in environment.step_keys:  # nothing changes
        noop["next", key] = winner[key]
    twins = torch.stack([noop, winner] + [padding] * (T - 2), dim=1)
    twins["mask"] = (torch.arange(T) < 2).expand(len(e), T).clone()
    twins["relabeled"] = torch.ones(len(e), T, dtype=torch.bool)
    return twins


class NoOpTwins(Transform):
    """Appends the no-op twins of a batch of finished episodes to it (:func:`noop_twins`).

    A TorchRL transform on episode batches [E, T] (``episodes.py``), after hindsight relabeling
    (so relabeled successes get twins too): called as a module, or as the write-side (``inv``)
    transform of a replay buffer of episodes. The output is [E + M, T].

    Args:
        seed (int | None): seed of the no-ops' draw.
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment`; it must have
            ``noop_actions``.
    """

    def __init__(self, seed: int | None = None, *, environment: TextEnvironment) -> None:
        environment = require_environment(environment)
        environment.require("noop_actions", "no-op twins")
        super().__init__(
            in_keys=["mask", *environment.state_keys, ("next", "reward"), ("next", "terminated")],
            out_keys=["action", "relabeled"],
        )
        self.environment = environment
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)

    def forward(self, episodes: TensorDictBase) -> TensorDictBase:
        twins = noop_twins(episodes, self.generator, environment=self.environment)
        return torch.cat([episodes, twins]) if len(twins) else episodes

    def _inv_call(self, episodes: TensorDictBase) -> TensorDictBase:
        return self.forward(episodes)

    # ---- checkpoints: torch's "_extra_state" entry, so ``state_dict()`` holds the draws' generator
    def get_extra_state(self) -> dict:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
