"""The text of a compact state as a TorchRL transform: :class:`RenderState` writes "prompt" and
"actions" from any :class:`~torchrl_glam.envs.TextEnvironment`'s state, wherever text is needed:

* on the environment, for acting: ``TransformedEnv(environment.make_env(...), environment.render_transform())``
  (or as the first module of a policy, ``torchrl_glam.modules.make_policy(scorer, render=...)``);
* on a replay buffer, at sampling time: ``ReplayBuffer(..., transform=environment.render_transform(next_state=True))``
  stores integers and hands out batches with the text of the observations and next observations.

Training loops keep states as integers (0.6 ms a Playground-Text step instead of 12), and relabeling
is changing ``goal_id``; the LLM reads text. Also :class:`PartialResetActionMask`.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.data import NonTensor
from torchrl.envs.transforms import ActionMask, Transform

from torchrl_glam.envs.keys import ACTIONS_KEY, PROMPT_KEY


class RenderState(Transform):
    """Writes "prompt" (a str per state) and "actions" (the candidates, a list of str per state)
    from the compact state of any :class:`~torchrl_glam.envs.protocol.TextEnvironment` (its
    ``render``); with ``next_state=True`` also ("next", "prompt"), ("next", "actions") from the
    next state under "next" (its episode keys are the root's).

    Text is stored as one non-tensor entry per key (the lists, not a stack of strings), the fast
    form that the LLM scorer reads.
    """

    def __init__(self, environment, next_state: bool = False) -> None:
        self.episode_keys, self.step_keys = tuple(environment.episode_keys), tuple(environment.step_keys)
        super().__init__(in_keys=list(self.episode_keys + self.step_keys), out_keys=[PROMPT_KEY, ACTIONS_KEY])
        self.environment = environment
        self.next_state = next_state

    def render(self, td: TensorDictBase, source: TensorDictBase | None = None) -> TensorDictBase:
        """Writes the text of ``td``'s state into ``td`` (``source``: where the episode keys are,
        when not in ``td``)."""
        source = td if source is None else source
        batch = td.batch_size
        state = {k: source[k] for k in self.episode_keys} | {k: td[k] for k in self.step_keys}
        flat = {k: x.reshape(-1, *x.shape[len(batch) :]).cpu() for k, x in state.items()}  # text is rendered on CPU
        prompts, actions = self.environment.render(flat)
        if len(batch) != 1:  # nest the flat lists back into the batch shape
            for size in reversed(batch[1:]):
                prompts = [prompts[i : i + size] for i in range(0, len(prompts), size)]
                actions = [actions[i : i + size] for i in range(0, len(actions), size)]
        td.set_non_tensor(PROMPT_KEY, prompts if len(batch) else prompts[0])
        td.set_non_tensor(ACTIONS_KEY, actions if len(batch) else actions[0])
        return td

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Offline use (a replay buffer's sampled batch, a policy's input)."""
        self.render(tensordict)
        if self.next_state and "next" in tensordict.keys():
            self.render(tensordict.get("next"), source=tensordict)
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:  # env.step's output
        return self.render(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self.render(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        shape = observation_spec.shape
        observation_spec[PROMPT_KEY] = NonTensor(shape=shape, example_data="", device=observation_spec.device)
        observation_spec[ACTIONS_KEY] = NonTensor(shape=shape, example_data=[""], device=observation_spec.device)
        return observation_spec


class PartialResetActionMask(ActionMask):
    """TorchRL's :class:`~torchrl.envs.transforms.ActionMask` (random actions that follow
    "action_mask"), for batched environments whose sub-environments reset one by one.

    A batched environment's partial reset (``SerialEnv``, ``ParallelEnv``; rollouts with
    ``break_when_any_done=False``) hands the transform zeros for the sub-environments it did not
    reset, and the stock transform copies those all-false rows into the action spec:
    ``invalid multinomial distribution`` at the next random action. This one keeps the current mask
    of the sub-environments that were not reset::

        TransformedEnv(ParallelEnv(2, make_env), PartialResetActionMask())

    Examples:
        >>> import torch
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl_glam.envs import PartialResetActionMask
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> env = TransformedEnv(
        ...     PlaygroundTextEnv(num_envs=4, goals="simplified", seed=0, text=False), PartialResetActionMask()
        ... )
        >>> _ = torch.manual_seed(0)
        >>> rollout = env.rollout(12, break_when_any_done=False)  # random actions; episodes end and restart
        >>> rollout.shape, bool(rollout["next", "done"].any())
        (torch.Size([4, 12]), True)
        >>> bool(rollout["action_mask"].gather(-1, rollout["action"][..., None]).all())  # every one legal
        True
    """

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        spec = self.action_spec
        mask = tensordict_reset.get(self.in_keys[1]).to(spec.device)
        current = spec.mask  # the last step's masks (None before the first reset)
        if tensordict is not None and "_reset" in tensordict.keys() and current is not None:
            reset = tensordict.get("_reset").reshape(*mask.shape[:-1], 1).to(spec.device)
            mask = torch.where(reset, mask, current.expand_as(mask))
        spec.update_mask(mask)
        return tensordict_reset


__all__ = ["PartialResetActionMask", "RenderState"]
