"""PPO-GLAM (Carta et al. 2023; the paper's baseline, Table 1) on TorchRL's ``ClipPPOLoss`` and ``GAE``.

The same scorer as SAC-GLAM gives the policy (masked softmax over the candidates' scores); the
value is an MLP on the LLM's prompt representation ("prompt_hidden"), which does not depend on
the candidates, as in GLAM. As for SAC, the LLM runs outside the loss: rollouts are compact
states; :meth:`PPOGLAMLoss.advantages` scores them without gradient and runs GAE, and
:meth:`PPOGLAMLoss.forward` rescores a minibatch with gradient and hands ``ClipPPOLoss`` the
scores and hidden states. Both the policy and the value loss train the LLM (shared weights).

Rollout keys ([B, T], time last): the compact state ("goal_id", "objects", "agent_on", "held",
"grown"), "action", "sample_log_prob" (log-probability of the action when it was taken), and
under "next" the state after the step, "reward", "done", "terminated".
"""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import MLP
from torchrl.objectives import ClipPPOLoss, ValueEstimators

from torchrl_glam.envs import GoalCatalogue
from torchrl_glam.modules import PROMPT_HIDDEN_KEY, LLMScorer, make_actor
from torchrl_glam.objectives.common import score_states

VALUE_KEY = "state_value"


def make_value_head(hidden_size: int, width: int = 1024, depth: int = 2) -> TensorDictModule:
    """GLAM's value head: "prompt_hidden" [*B, H] -> "state_value" [*B, 1]."""
    mlp = MLP(in_features=hidden_size, out_features=1, num_cells=[width] * depth, activation_class=nn.ReLU)
    return TensorDictModule(mlp, in_keys=[PROMPT_HIDDEN_KEY], out_keys=[VALUE_KEY])


class PPOGLAMLoss(nn.Module):
    """The scorer, the value head and ``ClipPPOLoss`` with ``GAE``; see the module docstring.

    Args:
        scorer: the :class:`~torchrl_glam.modules.LLMScorer`.
        clip_epsilon, entropy_coeff, critic_coeff, gamma, lmbda: Table 1 (0.2, 0.01, 0.5, 0.99, 0.99).
        value_width: units of the value head's two hidden layers.
    """

    def __init__(
        self,
        scorer: LLMScorer,
        clip_epsilon: float = 0.2,
        entropy_coeff: float = 0.01,
        critic_coeff: float = 0.5,
        gamma: float = 0.99,
        lmbda: float = 0.99,
        value_width: int = 1024,
        catalogue: GoalCatalogue | None = None,
    ) -> None:
        super().__init__()
        self.scorer = scorer
        self.catalogue = catalogue or GoalCatalogue.default()
        self.actor = make_actor(return_log_prob=True)
        self.value = make_value_head(scorer.hidden_size, value_width)
        self.ppo = ClipPPOLoss(
            self.actor,
            self.value,
            clip_epsilon=clip_epsilon,
            entropy_coeff=entropy_coeff,
            critic_coeff=critic_coeff,
            loss_critic_type="l2",
            normalize_advantage=False,
        )
        self.ppo.set_keys(sample_log_prob="sample_log_prob", value=VALUE_KEY)
        self.ppo.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=lmbda)

    def parameters_to_train(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    @torch.no_grad()
    def advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """Adds "advantage", "value_target" and "state_value" to a rollout [B, T] (GAE)."""
        flat = rollout.reshape(-1)
        obs = score_states(self.scorer, flat, catalogue=self.catalogue)
        nxt = score_states(self.scorer, flat, next_obs=True, catalogue=self.catalogue)
        data = rollout.clone(False)
        data[PROMPT_HIDDEN_KEY] = obs[PROMPT_HIDDEN_KEY].reshape(*rollout.shape, -1)
        data["next", PROMPT_HIDDEN_KEY] = nxt[PROMPT_HIDDEN_KEY].reshape(*rollout.shape, -1)
        self.ppo.value_estimator(data)
        return data

    def forward(self, minibatch: TensorDictBase) -> TensorDict:
        """``ClipPPOLoss`` on a flat minibatch of a rollout with advantages, rescored with gradient.

        Returns "loss_objective", "loss_critic", "loss_entropy" and diagnostics ("entropy",
        "clip_fraction", "kl_approx", "ratio" (mean probability ratio, 1 in the first epoch)).
        """
        minibatch = minibatch.to(next(self.scorer.parameters()).device)
        scored = score_states(self.scorer, minibatch, catalogue=self.catalogue)
        td = minibatch.select("action", "sample_log_prob", "advantage", "value_target").clone(False)
        td.update(scored)
        out = self.ppo(td)
        with torch.no_grad():
            log_prob = self.actor.get_dist(td).log_prob(td["action"])
            out["ratio"] = (log_prob - td["sample_log_prob"]).exp().mean()
        return out
