"""GRPO-GLAM: group-relative policy optimisation (Shao et al. 2024, GRPO; Feng et al. 2025, GiGPO's
step-level groups) on the candidate-scoring policy of GLAM, with TorchRL's ``ClipPPOLoss`` and no
critic.

Episodes come in groups of ``G`` from one start (``TextEnvironment.reset_in_groups``: the same scene
and goal). Every step of an episode gets its episode's group-relative advantage::

    A_episode(i) = (R_i - mean_j R_j) / (std_j R_j + eps)        R_i: episode i's return (its rewards' sum)

and, with ``step_level`` (GiGPO), the steps whose compact states are identical across the group's
episodes (an "anchor state", the goal included) form a step group, whose discounted returns-to-go
``G_t = sum_k gamma^k r_{t+k}`` are normalised together and added with weight ``step_weight``::

    A(i, t) = A_episode(i) + step_weight * (G_{i,t} - mean_step_group G) / (std_step_group G + eps)

A step group of one step (a state no other episode of the group visited) adds 0, as do groups whose
returns are all equal. ``std`` is the sample standard deviation (Bessel's correction, as
``torch.std``). The policy is the masked softmax over the candidates' scores; TorchRL's
``ClipPPOLoss`` (``critic_network=None``) gives ``-mean(min(r A, clip(r, 1 - eps, 1 + eps) A))`` and
the entropy bonus, and ``kl_coeff`` adds ``kl_coeff * mean KL(pi_theta(.|s) || pi_ref(.|s))`` to the
initial policy, computed exactly over the candidates (the papers estimate it from sampled tokens; here
every candidate is scored anyway). As for the other GLAM objectives the LLM runs outside TorchRL's
loss: :meth:`GRPOGLAMLoss.forward` rescores a minibatch of compact states with gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase, TensorDictParams
from tensordict.utils import NestedKey
from torch import nn
from torchrl.modules import MaskedCategorical
from torchrl.objectives import ClipPPOLoss

from torchrl_glam.envs import TextEnvironment
from torchrl_glam.modules import MASKED_LOGIT, SCORES_KEY, GLAMAgent, LLMScorer, make_actor
from torchrl_glam.objectives.common import PolicyGradientObjective, score_states

#: the initial policy's candidate scores of a rollout's states (:meth:`GRPOGLAMLoss.reference_scores`)
REFERENCE_SCORES_KEY = "reference_scores"


def episode_advantages(returns: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """GRPO's advantages [B] of episodes' returns [B], groups of ``group_size`` consecutive
    episodes: ``(R - mean) / (std + eps)`` within each group (sample std)."""
    if group_size < 2 or returns.numel() % group_size:
        raise ValueError(f"groups of {group_size} episodes: at least 2, dividing the {returns.numel()} episodes")
    groups = returns.reshape(-1, group_size)
    return ((groups - groups.mean(-1, keepdim=True)) / (groups.std(-1, keepdim=True) + eps)).reshape(-1)


def returns_to_go(reward: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted returns-to-go [B, T] of rewards [B, T] over the masked (valid) steps."""
    out = torch.zeros_like(reward)
    running = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1] - 1, -1, -1):
        running = torch.where(mask[:, t], reward[:, t] + gamma * running, torch.zeros_like(running))
        out[:, t] = running
    return out


def step_advantages(
    state_ids: torch.Tensor, rtg: torch.Tensor, mask: torch.Tensor, group_size: int, eps: float = 1e-6
) -> torch.Tensor:
    """GiGPO's step-level advantages [B, T]: within each group of ``group_size`` episodes, the valid
    steps with the same ``state_ids`` [B, T] (one id per distinct compact state) form a step group,
    and each step's return-to-go is normalised within it (0 for a step group of one)."""
    out = torch.zeros_like(rtg)
    for first in range(0, state_ids.shape[0], group_size):
        rows = slice(first, first + group_size)
        ids, values, valid = state_ids[rows], rtg[rows], mask[rows]
        advantage = torch.zeros_like(values)
        for state in ids[valid].unique():
            members = valid & (ids == state)
            if int(members.sum()) < 2:
                continue
            group = values[members]
            advantage[members] = (group - group.mean()) / (group.std() + eps)
        out[rows] = advantage
    return out


class GRPOGLAMLoss(PolicyGradientObjective):
    """GRPO on GLAM's candidate-scoring policy, TorchRL's ``ClipPPOLoss`` without a critic; see the
    module docstring.

    Args:
        scorer (LLMScorer | GLAMAgent): the :class:`~torchrl_glam.modules.LLMScorer`, or a
            :class:`~torchrl_glam.modules.GLAMAgent` (its scorer, and its environment unless
            ``environment`` names one); ``glam_agent`` is the agent that acts with it.
        group_size (int): G, the episodes of a group from one start (at least 2).
        clip_epsilon (float): the clipped ratio's bound (0.2).
        entropy_coeff (float): the entropy bonus's weight (0: GRPO's papers have none).
        kl_coeff (float): beta of the KL to the initial policy (0: none, and no copy of the initial weights kept).
        step_level (bool): add GiGPO's step-level advantages (steps of identical compact states across a
            group's episodes).
        step_weight (float): omega, their weight (GiGPO: 1).
        gamma (float): the discount of the step-level returns-to-go (GiGPO: 0.95).
        eps (float): added to the groups' standard deviations.
        score_chunk (int): prompts scored at once without gradient (bounds the memory).
        environment (TextEnvironment | None): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` whose compact
            states the loss renders; default the agent's.

    :meth:`advantages` reads a rollout [B, T] (B = groups x G sub-environments, each one episode,
    "mask" [B, T] its steps) and writes "advantage" [B, T, 1] (and "reference_scores" with a KL);
    :meth:`forward` reads ``in_keys`` of a flat minibatch and writes ``out_keys``.

    Examples:
        >>> import torch
        >>> from torchrl_glam.envs import get_environment
        >>> from torchrl_glam.modules import make_scorer
        >>> from torchrl_glam.objectives.grpo_glam import GRPOGLAMLoss, episode_advantages
        >>> loss = GRPOGLAMLoss(make_scorer(None).module, group_size=4, environment=get_environment("playground"))
        >>> episode_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), group_size=4)
        tensor([ 0.8660, -0.8660, -0.8660,  0.8660])
        >>> sorted(loss.out_keys)
        ['clip_fraction', 'entropy', 'kl_approx', 'kl_to_initial', 'loss_entropy', 'loss_kl', 'loss_objective', 'ratio']
    """

    @dataclass
    class _AcceptedKeys(PolicyGradientObjective._AcceptedKeys):
        """The tensordict keys this loss reads and writes (change them with ``set_keys``)."""

        mask: NestedKey = "mask"
        reference_scores: NestedKey = REFERENCE_SCORES_KEY

    default_keys = _AcceptedKeys
    #: the keys TorchRL's PPO loss reads under names set here
    _FORWARDED_KEYS = ("action", "sample_log_prob", "advantage")

    def __init__(
        self,
        scorer: LLMScorer | GLAMAgent,
        group_size: int = 8,
        clip_epsilon: float = 0.2,
        entropy_coeff: float = 0.0,
        kl_coeff: float = 0.0,
        step_level: bool = False,
        step_weight: float = 1.0,
        gamma: float = 0.95,
        eps: float = 1e-6,
        score_chunk: int = 512,
        *,
        environment: TextEnvironment | None = None,
    ) -> None:
        super().__init__()
        if group_size < 2:
            raise ValueError(f"group_size={group_size}: a group needs at least 2 episodes to compare")
        if kl_coeff < 0 or entropy_coeff < 0:
            raise ValueError(f"kl_coeff={kl_coeff} and entropy_coeff={entropy_coeff} must be at least 0")
        self._take_agent(scorer, environment)
        self.group_size, self.kl_coeff, self.step_level = group_size, kl_coeff, step_level
        self.step_weight, self.gamma, self.eps, self.score_chunk = step_weight, gamma, eps, score_chunk
        self.actor = make_actor(return_log_prob=True)
        self.ppo = ClipPPOLoss(
            self.actor, None, clip_epsilon=clip_epsilon, entropy_coeff=entropy_coeff, critic_coeff=None
        )
        self.ppo.set_keys(**self._forwarded(self._FORWARDED_KEYS))
        # the initial policy's trainable weights (all, or the LoRA adapters), swapped in to score it
        self.reference_llm = (
            TensorDictParams(self.llm_weights().data.clone(), no_convert=True) if kl_coeff > 0 else None
        )

    @property
    def in_keys(self) -> list[NestedKey]:
        keys = self.tensor_keys
        extra = [keys.reference_scores] if self.kl_coeff > 0 else []
        return [*self.environment.state_keys, keys.action, keys.sample_log_prob, keys.advantage, *extra]

    @property
    def out_keys(self) -> list[str]:
        return [
            "loss_objective",
            "loss_entropy",
            "loss_kl",
            "entropy",
            "kl_approx",
            "clip_fraction",
            "ratio",
            "kl_to_initial",
        ]

    def parameters_to_train(self) -> list[nn.Parameter]:
        """The LLM's trainable weights (all, or the LoRA adapters): the optimiser's, in this order."""
        return [p for p in self.scorer.parameters() if p.requires_grad]

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """The trainable parameters by name: "llm" (there is no head)."""
        return {"llm": self.parameters_to_train()}

    @torch.no_grad()
    def advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """Adds "advantage" [B, T, 1] to a rollout [B, T] of groups of ``group_size`` episodes (one
        episode per row, its steps under "mask"), and "reference_scores" [B, T, A] with a KL (0 on padded steps)."""
        keys = self.tensor_keys
        mask = rollout[keys.mask]
        reward = rollout["next", keys.reward].reshape(mask.shape).double()
        advantage = episode_advantages((reward * mask).sum(-1), self.group_size, self.eps)[:, None].expand_as(reward)
        if self.step_level:
            rtg = returns_to_go(reward, mask, self.gamma)
            advantage = advantage + self.step_weight * step_advantages(
                self.state_ids(rollout), rtg, mask, self.group_size, self.eps
            )
        data = rollout.clone(False)
        data[keys.advantage] = torch.where(mask, advantage, 0.0).float().unsqueeze(-1)
        if self.kl_coeff > 0:  # the episodes' steps only: padding is never trained on (its scores stay 0)
            valid = self.reference_scores(rollout[mask])
            data[keys.reference_scores] = valid.new_zeros(*mask.shape, valid.shape[-1]).index_put_((mask,), valid)
        return data

    def state_ids(self, rollout: TensorDictBase) -> torch.Tensor:
        """One integer per distinct compact state (the environment's state keys) of a rollout [B, T]:
        GiGPO's anchor states."""
        flat = rollout.reshape(-1)
        rows = torch.cat([flat[k].reshape(len(flat), -1).long() for k in self.environment.state_keys], dim=-1)
        return torch.unique(rows, dim=0, return_inverse=True)[1].reshape(rollout.shape)

    @torch.no_grad()
    def reference_scores(self, rollout: TensorDictBase) -> torch.Tensor:
        """The initial policy's candidate scores [*B, A] of a rollout's states."""
        flat = rollout.reshape(-1)
        scores = []
        with self.reference_llm.to_module(self.scorer):
            for chunk in flat.split(self.score_chunk):
                scores.append(score_states(self.scorer, chunk, environment=self.environment)[SCORES_KEY].cpu())
        scores = torch.cat(scores)
        return scores.reshape(*rollout.shape, scores.shape[-1])

    def forward(self, minibatch: TensorDictBase) -> TensorDict:
        """The loss of a flat minibatch of a rollout with advantages, rescored with gradient.

        Returns "loss_objective" (the clipped surrogate), "loss_entropy", "loss_kl" (``kl_coeff``
        times the mean KL to the initial policy; 0 without) and diagnostics "entropy",
        "kl_approx", "clip_fraction", "ratio" (mean pi_theta / pi_old) and "kl_to_initial".
        """
        keys, device = self.tensor_keys, self._device()
        scored = score_states(self.scorer, minibatch, environment=self.environment)
        td = minibatch.select(keys.action, keys.sample_log_prob, keys.advantage).to(device).clone(False)
        td.update(scored)
        out = self.ppo(td)
        policy = MaskedCategorical(logits=td[SCORES_KEY], mask=td["action_mask"], neg_inf=MASKED_LOGIT)
        kl = torch.zeros((), device=device)
        if self.kl_coeff > 0:
            reference = minibatch[keys.reference_scores].to(device)
            log_p = policy.logits.log_softmax(-1)
            log_ref = MaskedCategorical(logits=reference, mask=td["action_mask"], neg_inf=MASKED_LOGIT).logits
            kl = torch.where(td["action_mask"], log_p.exp() * (log_p - log_ref.log_softmax(-1)), 0.0).sum(-1).mean()
        out["loss_kl"] = self.kl_coeff * kl
        out["kl_to_initial"] = kl.detach()
        with torch.no_grad():
            out["ratio"] = (policy.log_prob(td[keys.action]) - td[keys.sample_log_prob]).exp().mean()
        return out.exclude("ESS", "max_ratio", "mean_ratio")


__all__ = [
    "REFERENCE_SCORES_KEY",
    "GRPOGLAMLoss",
    "episode_advantages",
    "returns_to_go",
    "step_advantages",
]
