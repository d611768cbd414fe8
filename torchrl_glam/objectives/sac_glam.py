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

Target networks: TorchRL's ``SoftUpdate`` keeps Polyak-averaged copies of the heads; the hidden
states they read on the next observation come from the LLM as it is now, which the actor's and
the critic's own updates move at every step. With ``target_llm`` the target heads read them from
a Polyak-averaged copy of the LLM's trainable weights (the LoRA adapters, or every weight) instead,
as a DQN target network would (not in the paper). The next observation's policy (the soft
value's pi(a|s')) still comes from the current LLM, so that option costs one more forward (without gradient) per update.

n-step returns: the transitions carry the n-step reward, the terminal flag of the window and
``steps_to_next_obs`` (k); TorchRL's TD(0) estimator inside ``DiscreteSACLoss`` bootstraps with
gamma ** k.

The loss is a TorchRL ``LossModule``: its ``in_keys`` / ``out_keys`` are declared, the names it
reads can be changed with ``set_keys`` (e.g. ``loss.set_keys(reward="r")``), the critic warm-up is
its state (``loss.warmup = True`` or ``with loss.warming_up(): ...``), and its parameters come in
named groups, ``loss.param_groups()`` -> {"llm", "heads", "alpha"}, for optimisers and tests.

Immediate-success head (``success_loss_coef > 0``; not in the paper): a third head, the Q-heads'
design, reads the same hidden states and predicts whether the chosen action itself achieved the
goal (a rewarded termination after one step; the label needs no model). Its class-balanced binary
cross-entropy, "loss_success", trains the head and, like the critic's loss, the LLM: a clean
contrast (a grasp of the goal's object against a grasp of another) where the critic's TD targets
carry it only as the gap between 1 and bootstrapped values near 1.
Without the head "loss_success" is 0, so summing every "loss_*" output stays the full loss.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictParams
from tensordict.utils import NestedKey
from torch import nn
from torchrl.objectives import DiscreteSACLoss, SoftUpdate, ValueEstimators

from torchrl_glam.envs import TextEnvironment, step_success
from torchrl_glam.modules import (
    ACTION_HIDDEN_KEY,
    PROMPT_HIDDEN_KEY,
    GLAMAgent,
    LLMScorer,
    make_actor,
    make_critic_heads,
)
from torchrl_glam.objectives.common import GLAMObjective, score_states

SUCCESS_LOGIT_KEY = "success_logit"
#: the critic's distances to the TD target: Huber (TorchRL's default) or the squared error
CRITIC_LOSSES = ("smooth_l1", "l2")


class SACGLAMLoss(GLAMObjective):
    """The scorer and ``DiscreteSACLoss`` of SAC-GLAM; see the module docstring.

    Args:
        scorer (LLMScorer | GLAMAgent): the :class:`~torchrl_glam.modules.LLMScorer` (the LLM; trained by both losses),
            or a :class:`~torchrl_glam.modules.GLAMAgent` (its scorer, and its environment unless
            ``environment`` names one); ``glam_agent`` is the agent that acts with it.
        qvalue_network (TensorDictModule | None): the Q-value head that ``DiscreteSACLoss`` makes its twin heads and
            their targets from (:func:`~torchrl_glam.modules.make_critic_heads`: its ``critic_input``,
            width, dueling; App. B-C); default ``make_critic_heads(hidden_size, num_actions=num_actions)``,
            the paper's observation-action head of width 1024.
        num_actions (int): candidates per step (N+2).
        critic_backprop (bool): whether the critic loss trains the LLM through the hidden states the heads
            read (App. B); decided here only: the heads detach nothing.
        gamma, alpha_init, target_entropy (float): SAC's discount and entropy settings (Tables 2-3).
        environment (TextEnvironment | None): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` whose compact
            states the loss renders; default the agent's (required with a bare scorer).
        target_llm (bool): the target heads read the next observation through a Polyak-averaged copy of
            the LLM (see the module docstring); ``False``: through the LLM itself (the paper).
        success_network, success_loss_coef (TensorDictModule | None, float): the immediate-success head (a head writing
            "success_logit", ``make_critic_heads(..., out_key="success_logit")``) and its loss's
            weight (see the module docstring); ``None`` and 0: no head (the paper).
        critic_loss (str): each head's distance to the TD target, "smooth_l1" (Huber, TorchRL's default)
            or "l2" (the squared error of SAC's papers).

    The critic's and the actor's losses take the prioritized sampler's importance weights w as
    ``sum(w * l) / sum(w)`` over the batch (TorchRL's reduction); the temperature's loss and the
    "entropy" diagnostic are plain means over the batch.

    Reads the compact state (the environment's ``state_keys``), "action", ("next", its ``step_keys``,
    "reward", "done", "terminated"), and when present "steps_to_next_obs" (n-step transitions),
    "priority_weight", and the text keys ("prompt", "actions", also under "next"). Writes
    ``out_keys``.

    Examples:
        >>> from torchrl_glam.envs import get_environment
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> from torchrl_glam.modules import GLAMAgent, make_critic_heads, make_scorer
        >>> from torchrl_glam.objectives import SACGLAMLoss
        >>> agent = GLAMAgent(make_scorer(None), environment=get_environment("playground"))
        >>> env = PlaygroundTextEnv(num_envs=4, goals="simplified", seed=0, text=False)
        >>> loss = SACGLAMLoss(agent, make_critic_heads(agent.llm.hidden_size, width=32), num_actions=5)
        >>> batch = env.rollout(3, agent.policy(), break_when_any_done=False).reshape(-1)
        >>> losses = loss(batch)
        >>> sorted(key for key in losses.keys() if key.startswith("loss_"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue', 'loss_success']
        >>> losses["loss_qvalue"].shape, losses["loss_qvalue"].requires_grad
        (torch.Size([]), True)
    """

    @dataclass
    class _AcceptedKeys:
        """The tensordict keys this loss reads (change them with ``set_keys``)."""

        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        steps_to_next_obs: NestedKey = "steps_to_next_obs"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    out_keys = ["loss_qvalue", "loss_actor", "loss_alpha", "loss_success", "td_error", "alpha", "entropy", "q_value"]

    def __init__(
        self,
        scorer: LLMScorer | GLAMAgent,
        qvalue_network: TensorDictModule | None = None,
        *,
        num_actions: int,
        critic_backprop: bool = True,
        gamma: float = 0.99,
        alpha_init: float = 0.005,
        target_entropy: float = 0.0,
        target_llm: bool = False,
        success_network: TensorDictModule | None = None,
        success_loss_coef: float = 0.0,
        critic_loss: str = "smooth_l1",
        environment: TextEnvironment | None = None,
    ) -> None:
        super().__init__()
        if critic_loss not in CRITIC_LOSSES:
            raise ValueError(f"critic_loss={critic_loss!r}: expected one of {CRITIC_LOSSES}")
        if (success_network is not None) != (success_loss_coef > 0):
            raise ValueError(
                f"success_loss_coef={success_loss_coef} with success_network="
                f"{'given' if success_network is not None else 'None'}: the immediate-success head needs both "
                f"(make_critic_heads(..., out_key={SUCCESS_LOGIT_KEY!r}) and a weight > 0), or neither"
            )
        self._take_agent(scorer, environment)
        self.num_actions = num_actions
        self.critic_backprop = critic_backprop
        self.actor = make_actor()
        # the heads detach nothing themselves: this module decides what reaches the LLM
        heads = qvalue_network if qvalue_network is not None else make_critic_heads(self.scorer.hidden_size)
        self.hidden_key = heads.in_keys[0]
        # what the heads read (a dueling head also the prompt's hidden state and the mask), and of
        # those the hidden states, which carry the critic's gradient into the LLM
        self.head_keys = list(heads.in_keys)
        self.hidden_keys = [k for k in self.head_keys if k in (ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY)]
        self.sac = DiscreteSACLoss(
            self.actor,
            heads,
            num_actions=num_actions,
            num_qvalue_nets=2,
            alpha_init=alpha_init,
            target_entropy=target_entropy,
            action_space="categorical",
            delay_qvalue=True,
            loss_function=critic_loss,
        )
        self.sac.make_value_estimator(ValueEstimators.TD0, gamma=gamma)
        self.success_loss_coef = success_loss_coef
        self.success_head = success_network
        self.warmup = False  # the critic warm-up: only the heads learn (see the module docstring)
        # buffers, not parameters: in the state dict (checkpoints), never in an optimiser
        self.target_llm = TensorDictParams(self.llm_weights().data.clone(), no_convert=True) if target_llm else None

    @property
    def in_keys(self) -> list[NestedKey]:
        keys = self.tensor_keys
        return [
            *self.environment.state_keys,
            keys.action,
            *(("next", k) for k in self.environment.step_keys),
            ("next", keys.reward),
            ("next", keys.done),
            ("next", keys.terminated),
        ]

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass  # the TD(0) estimator lives in self.sac and reads the tensordict this loss builds

    @contextmanager
    def warming_up(self, warmup: bool = True):
        """``with loss.warming_up(): loss(batch)``: the critic warm-up for the calls inside."""
        previous, self.warmup = self.warmup, warmup
        try:
            yield self
        finally:
            self.warmup = previous

    # ------------------------------------------------------------------ parameters
    def llm_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.scorer.parameters() if p.requires_grad]

    def head_parameters(self) -> list[nn.Parameter]:
        """The twin Q-heads', and the immediate-success head's when there is one."""
        success = list(self.success_head.parameters()) if self.success_head is not None else []
        return list(self.sac.qvalue_network_params.values(True, True)) + success

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """The trainable parameters by name: "llm" (the scorer: LoRA adapters or all weights),
        "heads" (the twin critic heads), "alpha" (SAC's log-temperature)."""
        return {"llm": self.llm_parameters(), "heads": self.head_parameters(), "alpha": [self.sac.log_alpha]}

    def alpha(self) -> torch.Tensor:
        """SAC's temperature (detached)."""
        return self.sac.log_alpha.detach().exp()

    def q_values(self, td: TensorDictBase) -> torch.Tensor:
        """Q-values [num_heads, *B, A] of the heads on ``td``'s hidden states (``head_keys``; no
        gradient is taken here: a diagnostic), each head run with its parameters through ``to_module``."""
        network, hidden = self.sac.qvalue_network, td.select(*self.head_keys)
        values = []
        for params in self.sac.qvalue_network_params.unbind(0):
            with params.to_module(network):
                values.append(network(hidden.clone(False))["action_value"])
        return torch.stack(values)

    @torch.no_grad()
    def min_q_values(self, states: TensorDictBase) -> torch.Tensor:
        """The smaller head's Q-values [*B, A] of compact states (their prompts rendered and scored):
        what SAC's targets take, for analyses of a trained critic."""
        scored = self.score(states)
        hidden = TensorDict({k: scored[k] for k in self.head_keys}, batch_size=states.batch_size)
        return self.q_values(hidden).min(0).values

    def make_target_updater(self, tau: float) -> TargetUpdate:
        """Soft update of the target heads, and of the target LLM when there is one."""
        return TargetUpdate(self, tau)

    # ------------------------------------------------------------------ forward
    def score(self, batch: TensorDictBase, next_obs: bool = False):
        """Scores and hidden states of the observation (or next observation) of a compact batch."""
        return score_states(self.scorer, batch, next_obs, environment=self.environment)

    def forward(self, batch: TensorDictBase, warmup: bool | None = None) -> TensorDict:
        """Losses of a batch of compact n-step transitions (``warmup``: overrides the state).

        Returns "loss_qvalue", "loss_actor", "loss_alpha", "loss_success" (scalars; the last 0
        without the immediate-success head), "td_error" [B] (for the priorities), and diagnostics
        "alpha", "entropy", "q_value".
        """
        keys = self.tensor_keys
        warmup = self.warmup if warmup is None else warmup
        batch = batch.to(self._device())  # replay lives on the CPU
        obs = self.score(batch)
        candidates = obs["action_mask"].shape[-1]  # the environment's mask rule: one column per candidate
        if candidates != self.num_actions:  # the heads would silently read the wrong candidates
            raise ValueError(
                f"the batch has {candidates} candidate actions per step but this loss was built with "
                f"num_actions={self.num_actions}: build it with num_actions={candidates} "
                "(environment.num_actions(env); Playground-Text: env.num_objects + 2)"
            )
        with torch.no_grad():
            nxt = self.score(batch, next_obs=True)
            if self.target_llm is not None:
                with self.target_llm.to_module(self.scorer):
                    target = self.score(batch, next_obs=True)
                nxt.update({k: target[k] for k in self.hidden_keys})
        detach_critic = warmup or not self.critic_backprop
        td = TensorDict(
            {
                **obs,
                "action": batch[keys.action],
                "next": {
                    **nxt,
                    "reward": batch["next", keys.reward],
                    "done": batch["next", keys.done],
                    "terminated": batch["next", keys.terminated],
                },
            },
            batch_size=batch.batch_size,
        )
        if keys.steps_to_next_obs in batch.keys(True):  # n-step transitions; absent: one-step
            td["steps_to_next_obs"] = batch[keys.steps_to_next_obs]
        if keys.priority_weight in batch.keys(True):
            td["priority_weight"] = batch[keys.priority_weight]
        critic_td = td.clone(False)
        if detach_critic:
            for key in self.hidden_keys:
                critic_td[key] = td[key].detach()
        loss_qvalue, q_meta = self.sac.qvalue_loss(critic_td)
        loss_success = self.success_loss(critic_td) if self.success_head is not None else loss_qvalue.new_zeros(())
        # the actor's -min Q term must not push gradient into the LLM through the hidden states
        actor_td = td.clone(False)
        for key in self.hidden_keys:
            actor_td[key] = td[key].detach()
        loss_actor, actor_meta = self.sac.actor_loss(actor_td)
        loss_alpha = self.sac.alpha_loss(actor_meta["log_prob"]).mean()
        with torch.no_grad():
            q_values = self.q_values(actor_td)
        chosen = q_values.min(0)[0].gather(-1, td["action"].unsqueeze(-1))
        return TensorDict(
            {
                "loss_qvalue": loss_qvalue,
                "loss_actor": loss_actor,
                "loss_alpha": loss_alpha,
                "loss_success": loss_success,
                "td_error": q_meta["td_error"],
                "alpha": self.alpha(),
                "entropy": -actor_meta["log_prob"].mean(),
                "q_value": chosen.mean(),
            },
            batch_size=[],
        )

    def success_loss(self, td: TensorDictBase) -> torch.Tensor:
        """The immediate-success head's weighted binary cross-entropy on ``td`` (hidden states,
        "action", ("next", "terminated") and ("next", "reward"), "steps_to_next_obs" when n-step).
        Successes and failures each weigh half: successes are a few percent of a batch, and the
        probe that learnt the match of a grasp with the goal (critic/capacity_probe.py) had them
        balanced."""
        logits = self.success_head(td.select(*self.success_head.in_keys))[SUCCESS_LOGIT_KEY]
        chosen = logits.gather(-1, td["action"].unsqueeze(-1)).squeeze(-1)
        # a success is a rewarded termination (an episode may also end on a failure); after one
        # step it is the chosen action's own success, not a later one's
        label = step_success(td["next"]).reshape(chosen.shape)
        if "steps_to_next_obs" in td.keys():
            label = label & (td["steps_to_next_obs"].reshape(chosen.shape) == 1)
        label = label.float()
        positives = label.sum()
        weights = torch.where(label > 0, 0.5 / positives.clamp(min=1), 0.5 / (label.numel() - positives).clamp(min=1))
        bce = F.binary_cross_entropy_with_logits(chosen, label, reduction="none")
        return self.success_loss_coef * (weights * bce).sum()


class TargetUpdate:
    """``step()``: TorchRL's ``SoftUpdate`` of a :class:`SACGLAMLoss`'s target heads, and the same
    Polyak average (``tau``) of its target LLM when it has one (``SoftUpdate`` only knows the
    target parameters that ``DiscreteSACLoss`` declares: the heads)."""

    def __init__(self, loss: SACGLAMLoss, tau: float) -> None:
        self.loss, self.tau = loss, tau
        self.heads = SoftUpdate(loss.sac, tau=tau)

    @torch.no_grad()
    def step(self) -> None:
        self.heads.step()
        if self.loss.target_llm is not None:
            self.loss.target_llm.data.lerp_(self.loss.llm_weights().data, self.tau)
