"""What every GLAM objective shares: scoring a batch of compact states, and its base classes.

The replay buffers and rollouts hold compact integer states (``torchrl_glam.data``); the LLM
needs text. SAC-GLAM, PPO-GLAM and GRPO-GLAM go through :func:`score_states`, so the prompts an
agent is trained on are exactly those it acted on. :class:`GLAMObjective` is their TorchRL
``LossModule`` base (the scorer, the environment, the acting agent, checkpoints);
:class:`PolicyGradientObjective` adds what the two around TorchRL's PPO loss share.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn
from torchrl.objectives import LossModule

from torchrl_glam.envs import TextEnvironment, require_environment
from torchrl_glam.modules import (
    ACTION_HIDDEN_KEY,
    ACTIONS_KEY,
    PROMPT_HIDDEN_KEY,
    PROMPT_KEY,
    SCORES_KEY,
    GLAMAgent,
    LLMScorer,
)


def score_states(
    scorer: LLMScorer,
    batch: TensorDictBase,
    next_obs: bool = False,
    *,
    environment: TextEnvironment,
) -> dict[str, torch.Tensor]:
    """Scores and hidden states of the observations of a flat batch of compact transitions
    (``next_obs``: of the states under "next", with the same episode keys, e.g. goal and objects).

    A batch that already carries its text ("prompt", "actions", e.g. sampled from a replay buffer
    with the environment's render transform) is scored as it is; otherwise the text is rendered
    here from the compact state.

    Examples:
        >>> from torchrl_glam.envs import get_environment
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> from torchrl_glam.modules import GLAMAgent, make_scorer
        >>> from torchrl_glam.objectives.common import score_states
        >>> playground = get_environment("playground")  # resolved once, passed as the object
        >>> agent = GLAMAgent(make_scorer(None), environment=playground)
        >>> env = PlaygroundTextEnv(num_envs=4, goals="simplified", seed=0, text=False)
        >>> batch = env.rollout(3, agent.policy(), break_when_any_done=False).reshape(-1)  # 12 transitions
        >>> out = score_states(agent.llm, batch, next_obs=True, environment=playground)
        >>> {key: tuple(value.shape) for key, value in out.items()}
        {'action_scores': (12, 5), 'action_mask': (12, 5), 'action_hidden': (12, 5, 64), 'prompt_hidden': (12, 64)}
    """
    environment = require_environment(environment)
    prefix = ("next",) if next_obs else ()
    state = {k: batch[k].cpu() for k in environment.episode_keys}  # text is rendered on CPU
    state.update({k: batch[prefix + (k,)].cpu() for k in environment.step_keys})
    if prefix + (PROMPT_KEY,) in batch.keys(True) and prefix + (ACTIONS_KEY,) in batch.keys(True):
        prompts, actions = batch[prefix + (PROMPT_KEY,)], batch[prefix + (ACTIONS_KEY,)]
        mask = environment.action_mask(state)
    else:
        prompts, actions, mask = environment.observations(state)
    mask = mask.to(batch["goal_id"].device)
    scores, action_hidden, prompt_hidden = scorer(prompts, actions, mask)
    return {SCORES_KEY: scores, "action_mask": mask, ACTION_HIDDEN_KEY: action_hidden, PROMPT_HIDDEN_KEY: prompt_hidden}


class TrainableState:
    """Checkpoints of a GLAM objective (an ``nn.Module``) without the frozen LLM weights: with LoRA
    the adapters, plus the heads, targets and the loss's own state (alpha, KL coefficient); the
    frozen base model comes back from its hub name or path."""

    def _device(self) -> torch.device:
        """The LLM's device, where the losses compute (replay and rollouts live on the CPU)."""
        return next(self.scorer.parameters()).device

    def _frozen_names(self) -> set[str]:
        return {name for name, p in self.named_parameters() if not p.requires_grad}

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        frozen = self._frozen_names()
        return {k: v for k, v in self.state_dict().items() if k not in frozen}

    def llm_weights(self) -> TensorDict:
        """The LLM's (``self.scorer``'s) trainable weights, by name, as a TensorDict (``to_module``
        swaps them in: a target or reference copy scores with them)."""
        weights = TensorDict.from_module(self.scorer)
        return weights.select(
            *(
                key
                for key, value in weights.items(True, True)
                if isinstance(value, nn.Parameter) and value.requires_grad
            )
        )

    def load_trainable_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing, unexpected = self.load_state_dict(state, strict=False)
        if unexpected or set(missing) - self._frozen_names():
            raise ValueError(
                f"checkpoint does not fit this agent: missing {sorted(set(missing) - self._frozen_names())[:5]}, "
                f"unexpected {unexpected[:5]} (was it written with another model or critic design?)"
            )


class GLAMObjective(TrainableState, LossModule):
    """What every GLAM objective holds: the LLM scorer it rescores compact states with
    (``scorer``), the environment that renders them (``environment``), the agent acting with that
    LLM (``glam_agent``), and checkpoints without the frozen weights (:class:`TrainableState`)."""

    def _take_agent(self, scorer: LLMScorer | GLAMAgent, environment: TextEnvironment | None) -> None:
        """Sets ``scorer``, ``environment`` and ``glam_agent`` from an objective's arguments: an
        ``LLMScorer`` (an agent is built around it), or a ``GLAMAgent`` (its environment unless one
        is given)."""
        agent = scorer if isinstance(scorer, GLAMAgent) else None
        if agent is not None:
            scorer, environment = agent.llm, agent.environment if environment is None else environment
        self.scorer = scorer
        self.environment = require_environment(environment)
        # off the module tree (object.__setattr__): the loss's state dict holds the LLM once, as "scorer"
        glam_agent = agent if agent is not None else GLAMAgent(scorer, environment=self.environment)
        object.__setattr__(self, "glam_agent", glam_agent)

    @property
    def catalogue(self):
        """The environment's goal catalogue."""
        return self.environment.catalogue


class PolicyGradientObjective(GLAMObjective):
    """A GLAM objective around a TorchRL PPO loss (``self.ppo``): the keys it names in
    ``_FORWARDED_KEYS`` are the TorchRL loss's too, so ``set_keys`` on the objective sets them there."""

    @dataclass
    class _AcceptedKeys:
        """The tensordict keys every such objective reads and writes; each adds its own in a
        subclass of this one (change them with ``set_keys``)."""

        action: NestedKey = "action"
        sample_log_prob: NestedKey = "sample_log_prob"
        advantage: NestedKey = "advantage"
        reward: NestedKey = "reward"

    _FORWARDED_KEYS: tuple[str, ...] = ()

    def _forwarded(self, names) -> dict[str, NestedKey]:
        """The objective's keys among ``names`` that the TorchRL loss reads, by name."""
        return {k: getattr(self.tensor_keys, k) for k in names if k in self._FORWARDED_KEYS}

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        if hasattr(self, "ppo"):  # LossModule.__init__ sets the keys before the TorchRL loss exists
            self.ppo.set_keys(**self._forwarded(kwargs))
