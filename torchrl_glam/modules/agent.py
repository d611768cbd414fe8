"""The GLAM agent as one module: the LLM scorer, the actor, the environment it acts in, its policies.

The scorer is a ``TensorDictModule`` over :class:`~torchrl_glam.modules.LLMScorer`, built once
(reads "prompt", "actions", "action_mask"; writes "action_scores", "action_hidden",
"prompt_hidden"). Its policies (:meth:`GLAMAgent.policy`: render, scorer, actor) are built once
each and kept off the module tree: they share the scorer, and a registered copy would put the LLM
into state dicts twice. The environment (a
:class:`~torchrl_glam.envs.protocol.TextEnvironment`) is a plain attribute, not a submodule.

The objectives (``SACGLAMLoss``, ``PPOGLAMLoss``) take an agent in place of their scorer, or
build one around it (``loss.glam_agent``)::

    agent = GLAMAgent(make_scorer(None), environment=get_environment("playground"))
    agent.act(td)                    # writes td["action"]: a sample of the policy
    agent.act(td, greedy=True)       # the policy's mode
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_glam.envs import ACTION_MASK_KEY, TextEnvironment, require_environment
from torchrl_glam.modules.actor import make_actor
from torchrl_glam.modules.policy import BEHAVIOUR_SCORES_KEY, LOG_PROB_KEY, make_policy
from torchrl_glam.modules.scoring import (
    ACTION_HIDDEN_KEY,
    ACTIONS_KEY,
    PROMPT_HIDDEN_KEY,
    PROMPT_KEY,
    SCORES_KEY,
    LLMScorer,
)


class GLAMAgent(nn.Module):
    """An LLM agent: ``scorer`` (a :class:`~torchrl_glam.modules.LLMScorer`, or the
    ``TensorDictModule`` of :func:`~torchrl_glam.modules.make_scorer`), ``actor``
    (:func:`~torchrl_glam.modules.make_actor`) and ``environment`` (a ``TextEnvironment``).

    Examples:
        >>> from torchrl_glam.envs import get_environment
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> from torchrl_glam.modules import GLAMAgent, make_scorer
        >>> agent = GLAMAgent(make_scorer(None), environment=get_environment("playground"))
        >>> env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0, text=False)
        >>> td = agent.act(env.reset(), greedy=True)  # renders the prompts, scores, takes the mode
        >>> td["action"].shape, td["action"].dtype
        (torch.Size([2]), torch.int64)
        >>> bool(td["action_mask"].gather(-1, td["action"][:, None]).all())  # a legal candidate
        True
        >>> agent.policy().out_keys  # the policy module, for a TorchRL collector
        ['action']
    """

    def __init__(self, scorer: LLMScorer | TensorDictModuleBase, *, environment: TextEnvironment) -> None:
        super().__init__()
        if not isinstance(scorer, TensorDictModuleBase):
            scorer = TensorDictModule(
                scorer,
                in_keys=[PROMPT_KEY, ACTIONS_KEY, ACTION_MASK_KEY],
                out_keys=[SCORES_KEY, ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY],
            )
        self.scorer = scorer
        self.actor = make_actor()
        self.environment = require_environment(environment)
        self._policies: dict[bool, TensorDictSequential] = {}  # a dict: not registered as submodules

    @property
    def llm(self) -> LLMScorer:
        """The :class:`~torchrl_glam.modules.LLMScorer` inside the scorer module."""
        return self.scorer.module

    @classmethod
    def of(cls, owner) -> GLAMAgent:
        """The agent of ``owner``: itself, an objective's ``glam_agent``, or (any other object
        holding a ``scorer`` and an ``environment``) one built around them."""
        if isinstance(owner, GLAMAgent):
            return owner
        agent = getattr(owner, "glam_agent", None)
        return agent if agent is not None else cls(owner.scorer, owner.environment)

    def policy(self, return_log_prob: bool = False) -> TensorDictSequential:
        """``make_policy(scorer, render=environment.render_transform())``: the compact state and
        "action_mask" -> "action" (and "sample_log_prob", "action_scores" with ``return_log_prob``)."""
        if return_log_prob not in self._policies:
            self._policies[return_log_prob] = make_policy(
                self.scorer, render=self.environment.render_transform(), return_log_prob=return_log_prob
            )
        return self._policies[return_log_prob]

    @torch.no_grad()
    def act(
        self, td: TensorDictBase, greedy: bool = False, with_log_prob: bool = False, with_scores: bool = False
    ) -> TensorDictBase:
        """Writes "action" into an environment tensordict: a sample of the policy, or its mode
        with ``greedy`` (TorchRL's deterministic exploration type); with ``with_log_prob`` also its
        log-probability ("sample_log_prob") and the candidates' scores ("behaviour_scores"), the
        behaviour policy PPO needs; with ``with_scores`` the candidates' scores as "action_scores"
        (an evaluation's transcripts show their probabilities)."""
        device = next(self.llm.parameters()).device
        policy = self.policy(return_log_prob=(with_log_prob and not greedy) or with_scores)
        with set_exploration_type(ExplorationType.DETERMINISTIC if greedy else ExplorationType.RANDOM):
            out = policy(td.select(*self.environment.state_keys, ACTION_MASK_KEY).to(device))
        td.set("action", out["action"].cpu())
        if with_log_prob and not greedy:
            td.set(LOG_PROB_KEY, out[LOG_PROB_KEY].cpu())
            td.set(BEHAVIOUR_SCORES_KEY, out[SCORES_KEY].cpu())
        if with_scores:
            td.set(SCORES_KEY, out[SCORES_KEY].cpu())
        return td
