"""PPO-GLAM (Carta et al. 2023; the paper's baseline, Table 1) on TorchRL's ``ClipPPOLoss`` or
``KLPENPPOLoss`` and ``GAE``, with the HER variants of the paper's App. G.

The same scorer as SAC-GLAM gives the policy (masked softmax over the candidates' scores); the
value is an MLP on the LLM's prompt representation ("prompt_hidden"), which does not depend on
the candidates, as in GLAM. As for SAC, the LLM runs outside the loss: rollouts are compact
states; :meth:`PPOGLAMLoss.advantages` scores them without gradient and runs GAE, and
:meth:`PPOGLAMLoss.forward` rescores a minibatch with gradient and hands the TorchRL loss the
scores and hidden states. Both the policy and the value loss train the LLM (shared weights).

With HER (App. G, eq. 4-5), a relabeled transition keeps the behaviour log-probability of its
action under the *original* goal g ("sample_log_prob", recorded when acting) while the policy is
scored under the relabeled goal g'. The ratio is then pi_theta(a|s,g') / pi_old(a|s,g), which is
not 1 in the first epoch; the KL penalty compares pi_old(.|s,g) (the candidates' scores recorded
when acting, "behaviour_scores") with pi_theta(.|s,g'). ``centred=True`` clips the ratio around
its first-epoch value c = pi_theta_old(a|s,g') / pi_old(a|s,g) instead of 1.

Rollout keys ([B, T], time last): the compact state (the environment's ``state_keys``; on
Playground-Text "goal_id", "objects", "agent_on", "held", "grown"), "action", "sample_log_prob",
"behaviour_scores" [B, T, A], and under "next" the state after the step, "reward", "done",
"terminated". Relabeled pieces [E, T] also carry "mask".

The loss is a TorchRL ``LossModule`` like :class:`~torchrl_glam.objectives.sac_glam.SACGLAMLoss`:
its ``in_keys`` / ``out_keys`` are declared, the names it reads can be changed with ``set_keys``
(e.g. ``loss.set_keys(reward="r")``: forwarded to the TorchRL PPO loss and its GAE), and its
parameters come in named groups, ``loss.param_groups()`` -> {"llm", "heads"}.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn
from torchrl.modules import MaskedCategorical
from torchrl.objectives import ClipPPOLoss, KLPENPPOLoss, ValueEstimators

from torchrl_glam.envs import TextEnvironment
from torchrl_glam.modules import (
    MASKED_LOGIT,
    PROMPT_HIDDEN_KEY,
    SCORES_KEY,
    VALUE_KEY,
    GLAMAgent,
    LLMScorer,
    make_actor,
    make_value_head,
)
from torchrl_glam.modules.policy import BEHAVIOUR_SCORES_KEY
from torchrl_glam.objectives.common import PolicyGradientObjective, score_states

#: log pi_theta_old(a | s, g) under the transition's (possibly relabeled) goal, at the start of the
#: update: the first epoch's numerator, the centre of the centred clip.
FIRST_EPOCH_LOG_PROB_KEY = "first_epoch_log_prob"
#: The actor's distribution parameter, as KLPENPPOLoss reads the previous policy from the data.
_LOGITS_KEY = "action_logits"

PPO_LOSSES = ("clip", "kl")


class PPOGLAMLoss(PolicyGradientObjective):
    """The scorer, the value head and a TorchRL PPO loss with ``GAE``; see the module docstring.

    Args:
        scorer (LLMScorer | GLAMAgent): the :class:`~torchrl_glam.modules.LLMScorer`, or a
            :class:`~torchrl_glam.modules.GLAMAgent` (its scorer, and its environment unless
            ``environment`` names one); ``glam_agent`` is the agent that acts with it.
        clip_epsilon, entropy_coeff, critic_coeff, gamma, gae_lambda (float): Table 1 (0.2, 0.01, 0.5, 0.99,
            0.99); the names of :class:`~torchrl_glam.algorithms.ppo_glam.config.PPOGLAMConfig`.
        value_network (TensorDictModule | None): the value head ("prompt_hidden" -> "state_value",
            :func:`~torchrl_glam.modules.make_value_head`); default ``make_value_head(hidden_size)``
            (two hidden layers of 1024 units, App. C).
        environment (TextEnvironment | None): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` whose compact
            states the loss renders; default the agent's (required with a bare scorer).
        ppo_loss (str): "clip" (``ClipPPOLoss``) or "kl" (``KLPENPPOLoss``, App. G.1).
        centred (bool): clip around the first-epoch ratio instead of 1 (App. G.2; "clip" only).
        kl_coeff, kl_target (float, float | None): the KL penalty's beta and, for TorchRL's adaptive rule, the target KL
            (``None``: beta stays ``kl_coeff``, as in the paper's eq. 5).
        score_chunk (int): prompts scored at once when computing advantages (bounds the memory).
        clip_value (float | None): ``None``: the value loss is the plain squared error (Table 1); a number: GLAM's
            code's clipped value loss, max((V - R)^2, (V_old + clip(V - V_old, +-clip_value) - R)^2),
            with V_old the value of the policy that collected (TorchRL's ``clip_value``).
        normalize_advantage (bool): standardise the advantages over each minibatch (TorchRL's
            ``normalize_advantage``; GLAM does not). Not with ``centred``, whose advantages carry c.
        bootstrap_time_limit (bool): GAE bootstraps with V(s') where an episode hits its time limit (the
            prompts do not show the time left, so this is the exact target); ``False``: a time
            limit ends the return like a terminal, as GLAM's ``mask = 1 - done``.

    :meth:`forward` reads ``in_keys`` (the compact state, "action", "sample_log_prob",
    "advantage", "value_target", and "first_epoch_log_prob" when centred, "behaviour_scores" for
    the KL loss) and writes ``out_keys``; :meth:`advantages` also reads ("next", state),
    ("next", "reward" / "done" / "terminated") and writes "advantage" and "value_target".
    """

    @dataclass
    class _AcceptedKeys(PolicyGradientObjective._AcceptedKeys):
        """The tensordict keys this loss reads and writes (change them with ``set_keys``)."""

        value_target: NestedKey = "value_target"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        behaviour_scores: NestedKey = BEHAVIOUR_SCORES_KEY
        first_epoch_log_prob: NestedKey = FIRST_EPOCH_LOG_PROB_KEY

    default_keys = _AcceptedKeys
    #: the keys the TorchRL PPO loss (and its GAE) reads under names set here
    _FORWARDED_KEYS = ("action", "sample_log_prob", "advantage", "value_target", "reward", "done", "terminated")

    def __init__(
        self,
        scorer: LLMScorer | GLAMAgent,
        value_network: TensorDictModule | None = None,
        clip_epsilon: float = 0.2,
        entropy_coeff: float = 0.01,
        critic_coeff: float = 0.5,
        gamma: float = 0.99,
        gae_lambda: float = 0.99,
        ppo_loss: str = "clip",
        centred: bool = False,
        kl_coeff: float = 1.0,
        kl_target: float | None = None,
        score_chunk: int = 512,
        clip_value: float | None = None,
        normalize_advantage: bool = False,
        bootstrap_time_limit: bool = True,
        *,
        environment: TextEnvironment | None = None,
    ) -> None:
        super().__init__()
        if ppo_loss not in PPO_LOSSES:
            raise ValueError(f"ppo_loss={ppo_loss!r}: expected one of {PPO_LOSSES}")
        if centred and ppo_loss != "clip":
            raise ValueError("centred=True moves the clipping range: it needs ppo_loss='clip'")
        if centred and normalize_advantage:
            raise ValueError(
                "centred=True weights the advantages by the first-epoch ratio before the loss sees them: "
                "it needs normalize_advantage=False"
            )
        if clip_value is not None and clip_value <= 0:
            raise ValueError(f"clip_value={clip_value}: expected a positive number, or None for no value clipping")
        self._take_agent(scorer, environment)
        self.loss_kind, self.centred, self.clip_epsilon = ppo_loss, centred, clip_epsilon
        self.score_chunk, self.clip_value, self.bootstrap_time_limit = score_chunk, clip_value, bootstrap_time_limit
        self.actor = make_actor(return_log_prob=True)
        self.value = make_value_head(self.scorer.hidden_size) if value_network is None else value_network
        common = dict(
            entropy_coeff=entropy_coeff,
            critic_coeff=critic_coeff,
            loss_critic_type="l2",
            normalize_advantage=normalize_advantage,
            clip_value=clip_value,
        )
        if ppo_loss == "clip":
            self.ppo = ClipPPOLoss(self.actor, self.value, clip_epsilon=clip_epsilon, **common)
        else:
            adaptive = {} if kl_target is not None else {"increment": 1.0, "decrement": 1.0}
            self.ppo = KLPENPPOLoss(
                self.actor, self.value, beta=kl_coeff, dtarg=kl_target or 0.01, **adaptive, **common
            )
        self.ppo.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=gae_lambda)
        self.ppo.set_keys(value=VALUE_KEY, **self._forwarded(self._FORWARDED_KEYS))

    @property
    def in_keys(self) -> list[NestedKey]:
        keys = self.tensor_keys
        extra = [keys.first_epoch_log_prob] if self.centred else []
        extra += [keys.behaviour_scores] if self.loss_kind == "kl" else []
        extra += [VALUE_KEY] if self.clip_value is not None else []
        return [
            *self.environment.state_keys,
            keys.action,
            keys.sample_log_prob,
            keys.advantage,
            keys.value_target,
            *extra,
        ]

    @property
    def out_keys(self) -> list[str]:
        kind = ["clip_fraction"] if self.loss_kind == "clip" else ["kl", "kl_coeff"]
        kind += ["value_clip_fraction"] if self.clip_value is not None else []
        return [
            "loss_objective",
            "loss_critic",
            "loss_entropy",
            "entropy",
            "kl_approx",
            "explained_variance",
            "ratio",
            "log_ratio",
            *kind,
        ]

    def parameters_to_train(self) -> list[nn.Parameter]:
        """The LLM's trainable weights (all, or the LoRA adapters) and the value head's, in this
        order (the optimiser's; its checkpoints index parameters by position)."""
        unique = {id(p): p for p in self.parameters() if p.requires_grad}
        return list(unique.values())

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """The trainable parameters by name: "llm" (the scorer: LoRA adapters or all weights) and
        "heads" (the value head)."""
        llm = [p for p in self.scorer.parameters() if p.requires_grad]
        in_llm = {id(p) for p in llm}
        return {"llm": llm, "heads": [p for p in self.parameters_to_train() if id(p) not in in_llm]}

    @torch.no_grad()
    def advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """Adds "advantage", "value_target", "state_value" and "first_epoch_log_prob" to a rollout
        [B, T] (GAE along the last dimension), on the scorer's device.

        Where the rollout has a "mask" (relabeled pieces, padded), only the masked steps are
        scored; the padding gets zero hidden states, and never reaches GAE's result on the masked
        steps since a piece ends with a terminal.
        """
        keys = self.tensor_keys
        mask = rollout.get("mask", None)
        steps = rollout[mask] if mask is not None else rollout.reshape(-1)
        hidden, next_hidden, log_prob = [], [], []
        for chunk in steps.split(self.score_chunk):
            obs = score_states(self.scorer, chunk, environment=self.environment)
            hidden.append(obs[PROMPT_HIDDEN_KEY])
            nxt = score_states(self.scorer, chunk, next_obs=True, environment=self.environment)
            next_hidden.append(nxt[PROMPT_HIDDEN_KEY])
            scores = obs[SCORES_KEY]
            dist = MaskedCategorical(logits=scores, mask=obs["action_mask"].to(scores.device), neg_inf=MASKED_LOGIT)
            log_prob.append(dist.log_prob(chunk[keys.action].to(scores.device)))
        data = rollout.clone(False).to(self._device())  # the caller's rollout stays as it was
        for key, values in (
            (PROMPT_HIDDEN_KEY, hidden),
            (("next", PROMPT_HIDDEN_KEY), next_hidden),
            (keys.first_epoch_log_prob, log_prob),
        ):
            values = torch.cat(values)
            if mask is None:
                data[key] = values.reshape(*rollout.shape, *values.shape[1:])
            else:
                full = values.new_zeros(*rollout.shape, *values.shape[1:])
                full[mask.to(full.device)] = values
                data[key] = full
        if self.bootstrap_time_limit:
            self.ppo.value_estimator(data)
        else:  # GLAM's mask = 1 - done: GAE reads every end of an episode as a terminal
            terminated = data["next", keys.terminated]
            data["next", keys.terminated] = data["next", keys.done].clone()
            self.ppo.value_estimator(data)
            data["next", keys.terminated] = terminated
        return data

    def forward(self, minibatch: TensorDictBase) -> TensorDict:
        """The PPO loss on a flat minibatch of a rollout with advantages, rescored with gradient.

        Returns "loss_objective", "loss_critic", "loss_entropy" and diagnostics: "entropy",
        "kl_approx", "explained_variance", "ratio" (mean of pi_theta(a|s,g') / pi_old(a|s,g): 1 at the first step of an
        update without HER) and its per-transition log "log_ratio" [N]; for the clipped loss
        "clip_fraction" (the share of ratios outside the clipping range: around 1, or centred
        around the first-epoch ratio); for the KL loss "kl" (mean KL(pi_old(.|s,g) || pi_theta(.|s,g')))
        and "kl_coeff" (beta after this step); with ``clip_value`` "value_clip_fraction" (the share
        of values outside V_old +- clip_value).
        """
        keys, device = self.tensor_keys, self._device()
        scored = score_states(self.scorer, minibatch, environment=self.environment)
        old_value = [VALUE_KEY] if self.clip_value is not None else []  # V_old, the clipped value's centre
        td = minibatch.select(keys.action, keys.sample_log_prob, keys.advantage, keys.value_target, *old_value)
        td = td.to(device).clone(False)
        td.update(scored)
        behaviour_log_prob = td[keys.sample_log_prob]
        if self.centred:
            # Clipping pi_theta/pi_old(.|g) to [c(1-eps), c(1+eps)] around the first-epoch ratio
            # c = pi_theta_old(a|s,g') / pi_old(a|s,g) is ClipPPOLoss's clip of pi_theta/pi_theta_old
            # (the log-ratio ball of radius eps moved from log 1 to log c) with the surrogate
            # weighted by c: with r' = r / c,
            #   min(r A, clip(r, c(1-eps), c(1+eps)) A) = min(r' cA, clip(r', 1-eps, 1+eps) cA).
            # So ClipPPOLoss gets the first-epoch log-prob as its denominator and the advantage times
            # c (TorchRL's decoupled "proximal policy" form, without a target actor).
            first = minibatch[keys.first_epoch_log_prob].to(device)
            td[keys.advantage] = td[keys.advantage] * (first - behaviour_log_prob).exp().unsqueeze(-1)
            td[keys.sample_log_prob] = first
        if self.loss_kind == "kl":
            td[_LOGITS_KEY] = minibatch[keys.behaviour_scores].to(device)  # the previous policy, pi_old(.|s,g)
        out = self._ppo_loss(td)
        with torch.no_grad():
            log_prob = self.actor.get_dist(td.exclude(_LOGITS_KEY)).log_prob(td[keys.action])
            out["log_ratio"] = log_prob - behaviour_log_prob
            out["ratio"] = out["log_ratio"].exp().mean()
            if self.loss_kind == "kl":
                out["kl"] = out["kl"].mean()
                out["kl_coeff"] = self.ppo.beta.detach().clone()
        return out.exclude("ESS", "max_ratio", "mean_ratio")  # about r / c when centred: "ratio" is r

    def _ppo_loss(self, td: TensorDictBase) -> TensorDict:
        """The TorchRL PPO loss on ``td``; for the KL loss, its backward pass uses the beta its value
        was computed with, and the module keeps the beta TorchRL's adaptive rule set for the next call.

        TorchRL 0.14.1's ``KLPENPPOLoss.forward`` (torchrl/objectives/ppo.py, lines 2041-2045) builds
        ``neg_loss - self.beta * kl`` and then adapts beta with ``self.beta.data *= increment`` (or
        ``decrement``). Autograd saved that very tensor for the gradient of ``beta * kl``, and
        ``.data`` skips its in-place check, so ``backward()`` used the adapted beta (2x or 1/2 x): a
        gradient 6-11% off the reported loss's on the training loop's batches. Here the graph's tensor
        gets the beta of the forward back and the module a new tensor holding the adapted one (read
        from the module, so a TorchRL that rebinds beta itself stays right).
        """
        if self.loss_kind != "kl":
            return self.ppo(td)
        in_graph = self.ppo.beta
        used = in_graph.detach().clone()
        out = self.ppo(td)
        adapted = self.ppo.beta.detach().clone()
        in_graph.data.copy_(used)  # .data: the saved tensor's version stays, so backward accepts it
        self.ppo.beta = adapted  # a tensor: nn.Module rebinds the buffer (a number would be copied in place)
        return out
