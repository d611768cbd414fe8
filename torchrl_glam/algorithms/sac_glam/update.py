"""SAC-GLAM's gradient step (:class:`SACGLAMUpdater`): losses, optimisers, soft target update, priorities."""

from __future__ import annotations

import torch

from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.objectives.sac_glam import SACGLAMLoss
from torchrl_glam.training.distributed import average_gradients, rank_share
from torchrl_glam.training.factories import check_finite


def per_beta_at(cfg: SACGLAMConfig, env_steps: int) -> float:
    """Prioritized replay's beta at ``env_steps``: linear from ``per_beta`` at 0 to ``per_beta_end``
    at ``total_steps`` (constant ``per_beta`` without an end). A function of the run's steps, as the
    learning rates, so a resume continues the schedule."""
    replay = cfg.replay
    if replay.per_beta_end is None:
        return replay.per_beta
    progress = min(env_steps / cfg.run.total_steps, 1.0)
    return replay.per_beta + progress * (replay.per_beta_end - replay.per_beta)


class SACGLAMUpdater:
    """One gradient step of SAC-GLAM: losses, optimisers, soft target update, priorities.

    Adam on the LLM (``actor_lr``: it receives the actor loss and, with ``critic_backprop``, the
    critic loss), on the heads (``critic_lr``) and on log-alpha (``alpha_lr``). With
    ``critic_llm_lr`` the critic's gradient into the LLM gets a second Adam on the same weights, at
    that rate, and the first keeps the actor's alone. From ``actor_lr_decay_at`` environment steps
    on, both LLM rates are multiplied by ``actor_lr_decay``. The immediate-success head's loss
    (``success_loss_coef``) goes with the critic's. During the first ``warmup_updates`` only the
    heads learn (see ``objectives/sac_glam.py``). Each of ``world`` data-parallel ranks samples its
    share of ``batch_size``.
    """

    def __init__(self, loss: SACGLAMLoss, replay: GoalReplay, cfg: SACGLAMConfig, world: int = 1) -> None:
        self.loss, self.replay, self.cfg = loss, replay, cfg
        self.batch_size = rank_share(cfg, "batch_size", world)  # this rank's share of every batch
        groups = loss.param_groups()  # "llm", "heads", "alpha"
        self.llm_optimizer = torch.optim.Adam(groups["llm"], lr=cfg.algorithm.actor_lr)
        self.critic_optimizer = torch.optim.Adam(groups["heads"], lr=cfg.algorithm.critic_lr)
        self.alpha_optimizer = torch.optim.Adam(groups["alpha"], lr=cfg.algorithm.alpha_lr)
        # two Adams on one set of weights: each keeps its own moments, so each loss moves the LLM at
        # its own rate (one Adam normalises the summed gradient: a scale on a loss cannot do it)
        self.critic_llm_optimizer = (
            torch.optim.Adam(groups["llm"], lr=cfg.algorithm.critic_llm_lr)
            if cfg.algorithm.critic_llm_lr is not None
            else None
        )
        self.llm_parameters = groups["llm"]
        self.target_updater = loss.make_target_updater(cfg.algorithm.tau)
        self.parameters = groups["llm"] + groups["heads"] + groups["alpha"]  # gradients averaged across ranks
        self.clipped = groups["llm"] + groups["heads"]  # gradient-norm clipping: not alpha
        #: each optimizer under the config field of its learning rate (SACGLAMConfig.LEARNING_RATE_FIELDS:
        #: a resume may change them)
        self.optimizers = {
            "algorithm.actor_lr": self.llm_optimizer,
            "algorithm.critic_lr": self.critic_optimizer,
            "algorithm.alpha_lr": self.alpha_optimizer,
        }
        if self.critic_llm_optimizer is not None:
            self.optimizers["algorithm.critic_llm_lr"] = self.critic_llm_optimizer
        self.updates = 0

    def step(self, batch_size: int | None = None, env_steps: int | None = None) -> dict[str, float]:
        """One update on a batch from replay; ``env_steps`` (the run's) sets the LLM's rates."""
        if env_steps is not None:
            self.set_llm_learning_rates(env_steps)
            if self.cfg.replay.per_beta_end is not None:
                self.replay.set_beta(per_beta_at(self.cfg, env_steps))
        batch = self.replay.sample(batch_size or self.batch_size)
        warmup = self.updates < self.cfg.algorithm.warmup_updates
        with self.loss.warming_up(warmup):
            out = self.loss(batch)
        critic_loss = out["loss_qvalue"] + out["loss_success"]
        loss = critic_loss if warmup else critic_loss + out["loss_actor"] + out["loss_alpha"]
        losses = ("loss_qvalue", "loss_actor", "loss_alpha", "loss_success")
        check_finite(loss, out, losses, f"update {self.updates}")  # every rank stops together
        optimizers = (
            [self.critic_optimizer] if warmup else [self.critic_optimizer, self.llm_optimizer, self.alpha_optimizer]
        )
        for optimizer in (self.critic_optimizer, self.llm_optimizer, self.alpha_optimizer):
            optimizer.zero_grad(set_to_none=True)
        separate_critic_step = self.critic_llm_optimizer is not None and not warmup
        if separate_critic_step:
            # the critic's gradient first, kept aside; then the actor's (and alpha's) alone
            critic_loss.backward(retain_graph=True)
            critic_grads = [p.grad for p in self.llm_parameters]
            for p in self.llm_parameters:
                p.grad = None
            loss = out["loss_actor"] + out["loss_alpha"]
        loss.backward()
        self._apply(optimizers)
        if separate_critic_step:
            for p, grad in zip(self.llm_parameters, critic_grads):
                p.grad = grad
            self._apply([self.critic_llm_optimizer], self.llm_parameters)
        self.target_updater.step()
        self.replay.update_priority(batch, out["td_error"])
        self.updates += 1
        metrics = {k: out[k].item() for k in ("loss_qvalue", "loss_actor", "loss_alpha", "alpha", "entropy", "q_value")}
        if self.loss.success_head is not None:
            metrics["loss_success"] = out["loss_success"].item()
        metrics["warmup"] = float(warmup)
        metrics["batch_relabeled"] = float(batch["relabeled"].float().mean())
        metrics["batch_collected_at"] = float(batch["collected_at"].float().mean())
        return metrics

    def set_llm_learning_rates(self, env_steps: int) -> None:
        """The LLM's rates at ``env_steps`` (``actor_lr_decay_at``, ``actor_lr_decay``).

        A function of the run's environment steps rather than a torch LR scheduler, which counts
        optimizer steps (their number per environment step depends on ``learning_starts`` and the
        ranks) and would need its own state in checkpoints; this way a resume gets the same rates.
        """
        decay_at = self.cfg.algorithm.actor_lr_decay_at
        scale = self.cfg.algorithm.actor_lr_decay if decay_at is not None and env_steps >= decay_at else 1.0
        for optimizer, rate in (
            (self.llm_optimizer, self.cfg.algorithm.actor_lr),
            (self.critic_llm_optimizer, self.cfg.algorithm.critic_llm_lr),
        ):
            if optimizer is not None:
                for group in optimizer.param_groups:
                    group["lr"] = rate * scale

    def _apply(self, optimizers: list[torch.optim.Optimizer], parameters: list | None = None) -> None:
        """Averages the gradients over ranks (data parallel: the same step on every rank), clips
        them, and steps ``optimizers``."""
        average_gradients(parameters or self.parameters)
        if self.cfg.algorithm.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(parameters or self.clipped, self.cfg.algorithm.max_grad_norm)
        for optimizer in optimizers:
            optimizer.step()

    def state_dict(self) -> dict:
        return {
            **(
                {"critic_llm_optimizer": self.critic_llm_optimizer.state_dict()}
                if self.critic_llm_optimizer is not None
                else {}
            ),
            "llm_optimizer": self.llm_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.llm_optimizer.load_state_dict(state["llm_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        if self.critic_llm_optimizer is not None:
            self.critic_llm_optimizer.load_state_dict(state["critic_llm_optimizer"])
        self.updates = state["updates"]
