"""SAC-GLAM's losses, assembled on TorchRL's ``DiscreteSACLoss`` (paper §2, App. B-C).

The LLM never enters the loss module. For a batch of compact transitions (``torchrl_glam.data``):

1. the prompts and candidates of the observation and of the next observation are rendered from
   ``goal_id`` and the compact state;
2. the scorer (the LLM) runs on the observation with gradient and on the next observation
   without: scores [B, A] (the actor's logits) and hidden states (the critic heads' input);
3. ``DiscreteSACLoss`` gets only those tensors: its actor is the masked categorical over the
   scores, its Q-network the small twin heads, its targets copies of the heads.

Gradient paths (App. B and the issue's probe): the critic loss reaches the LLM through the hidden
states when ``critic_backprop`` (the heads read detached states otherwise); the actor loss reaches
it through the scores only, since its ``-min Q`` term is evaluated on detached hidden states.
During the critic warm-up, the hidden states are detached for the critic too, so the actor (the
LLM) is left untouched while the heads learn.

n-step returns: the transitions carry the n-step reward, the terminal flag of the window and
``steps_to_next_obs`` (k); TorchRL's TD(0) estimator inside ``DiscreteSACLoss`` bootstraps with
gamma ** k.
"""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.objectives import DiscreteSACLoss, SoftUpdate, ValueEstimators

from torchrl_glam.envs import GoalCatalogue
from torchrl_glam.modules import LLMScorer, make_actor, make_critic_heads
from torchrl_glam.objectives.common import TrainableState, score_states


class SACGLAMLoss(TrainableState, nn.Module):
    """The scorer and ``DiscreteSACLoss`` of SAC-GLAM; see the module docstring.

    Args:
        scorer: the :class:`~torchrl_glam.modules.LLMScorer` (the LLM; trained by both losses).
        num_actions: candidates per step (N+2).
        critic_input: "observation_action" or "observation" (App. B).
        critic_backprop: whether the critic loss trains the LLM (App. B).
        critic_width: units of the heads' two hidden layers (1024 in App. C).
        gamma, alpha_init, target_entropy: SAC's discount and entropy settings (Tables 2-3).
        catalogue: the goal grammar, to render prompts.
    """

    def __init__(
        self,
        scorer: LLMScorer,
        num_actions: int,
        critic_input: str = "observation_action",
        critic_backprop: bool = True,
        critic_width: int = 1024,
        gamma: float = 0.99,
        alpha_init: float = 0.005,
        target_entropy: float = 0.0,
        catalogue: GoalCatalogue | None = None,
    ) -> None:
        super().__init__()
        self.scorer = scorer
        self.num_actions = num_actions
        self.catalogue = catalogue or GoalCatalogue.default()
        self.critic_backprop = critic_backprop
        self.actor = make_actor()
        # the heads detach nothing themselves: this module decides what reaches the LLM
        heads = make_critic_heads(
            scorer.hidden_size, critic_input, num_actions, width=critic_width, backprop_into_llm=True
        )
        self.hidden_key = heads.in_keys[0]
        self.sac = DiscreteSACLoss(
            self.actor,
            heads,
            num_actions=num_actions,
            num_qvalue_nets=2,
            alpha_init=alpha_init,
            target_entropy=target_entropy,
            action_space="categorical",
            delay_qvalue=True,
        )
        self.sac.make_value_estimator(ValueEstimators.TD0, gamma=gamma)

    # ------------------------------------------------------------------ parameters
    def llm_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.scorer.parameters() if p.requires_grad]

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.sac.qvalue_network_params.values(True, True))

    def make_target_updater(self, tau: float) -> SoftUpdate:
        """Soft update of the target heads (only the heads: the LLM is not in the loss)."""
        return SoftUpdate(self.sac, tau=tau)

    # ------------------------------------------------------------------ forward
    def score(self, batch: TensorDictBase, next_obs: bool = False):
        """Scores and hidden states of the observation (or next observation) of a compact batch."""
        return score_states(self.scorer, batch, next_obs, self.catalogue)

    def forward(self, batch: TensorDictBase, warmup: bool = False) -> TensorDict:
        """Losses of a batch of compact n-step transitions.

        Returns "loss_qvalue", "loss_actor", "loss_alpha" (scalars), "td_error" [B] (for the
        priorities), and diagnostics "alpha", "entropy", "q_value".
        """
        batch = batch.to(next(self.scorer.parameters()).device)  # replay lives on the CPU
        obs = self.score(batch)
        with torch.no_grad():
            nxt = self.score(batch, next_obs=True)
        detach_critic = warmup or not self.critic_backprop
        td = TensorDict(
            {
                **obs,
                "action": batch["action"],
                "next": {
                    **nxt,
                    "reward": batch["next", "reward"],
                    "done": batch["next", "done"],
                    "terminated": batch["next", "terminated"],
                },
            },
            batch_size=batch.batch_size,
        )
        if "steps_to_next_obs" in batch.keys():  # n-step transitions; absent: one-step (gamma ** 1)
            td["steps_to_next_obs"] = batch["steps_to_next_obs"]
        if "priority_weight" in batch.keys():
            td["priority_weight"] = batch["priority_weight"]
        critic_td = td.clone(False)
        if detach_critic:
            critic_td[self.hidden_key] = td[self.hidden_key].detach()
        loss_qvalue, q_meta = self.sac.qvalue_loss(critic_td)
        # the actor's -min Q term must not push gradient into the LLM through the hidden states
        actor_td = td.clone(False)
        actor_td[self.hidden_key] = td[self.hidden_key].detach()
        loss_actor, actor_meta = self.sac.actor_loss(actor_td)
        loss_alpha = self.sac.alpha_loss(actor_meta["log_prob"]).mean()
        with torch.no_grad():
            q_values = self.sac._vmap_qnetworkN0(
                actor_td.select(self.hidden_key), self.sac.qvalue_network_params
            )["action_value"]
        chosen = q_values.min(0)[0].gather(-1, td["action"].unsqueeze(-1))
        return TensorDict(
            {
                "loss_qvalue": loss_qvalue,
                "loss_actor": loss_actor,
                "loss_alpha": loss_alpha,
                "td_error": q_meta["td_error"],
                "alpha": self.sac._alpha.detach(),
                "entropy": -actor_meta["log_prob"].mean(),
                "q_value": chosen.mean(),
            },
            batch_size=[],
        )
