"""PPO-GLAM's update (:class:`PPOGLAMUpdater`): GAE, hindsight relabeling, epochs x minibatches of
the PPO loss, Adam, gradient clipping.

Advantages are computed once per rollout, with the values of the policy that collected it (as
GLAM and Stable-Baselines3 do; TorchRL's PPO example recomputes them every epoch, which here would
cost one more LLM pass over the rollout per epoch).
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase

from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig
from torchrl_glam.data.her import relabel_rollout
from torchrl_glam.data.subgoals import aligned_goal_filter
from torchrl_glam.objectives.ppo_glam import BEHAVIOUR_SCORES_KEY, FIRST_EPOCH_LOG_PROB_KEY, VALUE_KEY, PPOGLAMLoss
from torchrl_glam.training.distributed import all_max, rank_share
from torchrl_glam.training.factories import check_finite, gradient_step

#: What a minibatch of the update holds besides the compact state (collected and relabeled
#: transitions alike).
UPDATE_KEYS = (
    "action",
    "sample_log_prob",
    BEHAVIOUR_SCORES_KEY,
    FIRST_EPOCH_LOG_PROB_KEY,
    "advantage",
    "value_target",
    VALUE_KEY,  # V_old, the centre of the clipped value loss (clip_value)
    "relabeled",
)


class PPOGLAMUpdater:
    """One PPO update per rollout: advantages (and relabeled pieces with HER), then ``epochs``
    passes over the data in minibatches of ``minibatch_size``, each an Adam step on the summed
    losses after gradient clipping at ``max_grad_norm``.

    With HER the update's data are the collected transitions plus relabeled ones (their share
    capped at ``her_ratio``, drawn at random), with advantages computed on the relabeled pieces.

    Args:
        loss (PPOGLAMLoss): the :class:`~torchrl_glam.objectives.ppo_glam.PPOGLAMLoss`.
        cfg (PPOGLAMConfig): the run's config.
        world (int): the number of data-parallel ranks (each holds its share of every minibatch).
    """

    def __init__(self, loss: PPOGLAMLoss, cfg: PPOGLAMConfig, world: int = 1) -> None:
        self.loss, self.cfg, self.world = loss, cfg, world
        self.minibatch_size = rank_share(cfg, "minibatch_size", world)  # this rank's share of every minibatch
        # one Adam group (Table 1's single learning rate) over the loss's named groups, "llm" then
        # "heads": the order of parameters_to_train, so checkpoints' optimiser states still fit
        self.parameters = [p for group in loss.param_groups().values() for p in group]
        self.optimizer = torch.optim.Adam(self.parameters, lr=cfg.algorithm.lr)
        self.optimizers = {"algorithm.lr": self.optimizer}  # by learning-rate field (a resume may change it)
        self.keep_goal = (
            aligned_goal_filter(environment=loss.environment) if cfg.hindsight.her_filter == "aligned" else None
        )
        self.updates = 0  # gradient steps
        self.iterations = 0  # rollouts

    def update_data(self, rollout: TensorDictBase, reported_before: torch.Tensor | None = None) -> TensorDictBase:
        """The flat data [N] of one update: "advantage", "value_target", "first_epoch_log_prob",
        "relabeled" beside the rollout's keys (:data:`UPDATE_KEYS`). ``reported_before``: the goals
        each row's episode reported before the rollout (:attr:`Rollout.reported_before`)."""
        data = self.loss.advantages(rollout).reshape(-1)
        data["relabeled"] = torch.zeros(data.shape, dtype=torch.bool, device=data.device)
        data = data.select(*self.loss.environment.state_keys, *UPDATE_KEYS)
        if not self.cfg.hindsight.her:
            return data
        pieces = relabel_rollout(rollout, self.cfg.env.max_steps, self.keep_goal, reported_before)
        if not pieces.numel():
            return data
        pieces = self.loss.advantages(pieces)
        relabeled = pieces[pieces["mask"]].select(*self.loss.environment.state_keys, *UPDATE_KEYS)
        cap = int(len(data) * self.cfg.hindsight.her_ratio / (1 - self.cfg.hindsight.her_ratio))
        if len(relabeled) > cap:
            relabeled = relabeled[torch.randperm(len(relabeled))[:cap]]
        return torch.cat([data, relabeled])

    def update(self, rollout: TensorDictBase, reported_before: torch.Tensor | None = None) -> list[dict[str, float]]:
        """Runs the update on a full rollout [num_envs, T] (``reported_before`` as
        :meth:`update_data`); returns each gradient step's metrics."""
        data = self.update_data(rollout, reported_before)
        num_minibatches = all_max(math.ceil(len(data) / self.minibatch_size))  # the same steps on every rank
        keys = ["loss_objective", "loss_critic", "loss_entropy", "entropy", "kl_approx", "ratio"]
        keys += ["clip_fraction"] if self.cfg.algorithm.ppo_loss == "clip" else ["kl", "kl_coeff"]
        keys += ["value_clip_fraction"] if self.cfg.algorithm.clip_value is not None else []
        metrics = []
        for epoch in range(self.cfg.algorithm.epochs):
            for indices in torch.randperm(len(data)).tensor_split(num_minibatches):
                batch = data[indices]
                out = self.loss(batch)
                loss = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                losses = ("loss_objective", "loss_critic", "loss_entropy")
                check_finite(loss, out, losses, f"gradient step {self.updates}")
                grad_norm = gradient_step(self.optimizer, self.parameters, loss, self.cfg.algorithm.max_grad_norm)
                self.updates += 1
                step = {k: out[k].item() for k in keys}
                step["grad_norm"] = grad_norm.item()
                if epoch == 0:
                    step.update(self._first_epoch_ratios(batch, out))
                metrics.append(step)
        self.iterations += 1
        metrics[0]["update/transitions"] = float(len(data))
        metrics[0]["update/relabeled_share"] = data["relabeled"].float().mean().item()
        return metrics

    @staticmethod
    def _first_epoch_ratios(batch: TensorDictBase, out: TensorDictBase) -> dict[str, float]:
        """The mean ratio in the first epoch: exactly 1 at the update's first step without HER
        (the policy that collected is the one scored), then moved only by that epoch's earlier
        steps; with HER, split by origin (the relabeled ones start at c, App. G)."""
        ratios = {"ratio/first_epoch": out["ratio"].item()}
        relabeled = batch["relabeled"]
        if relabeled.any():
            ratio = out["log_ratio"].exp()
            ratios["ratio/first_epoch_relabeled"] = ratio[relabeled].mean().item()
            if (~relabeled).any():
                ratios["ratio/first_epoch_collected"] = ratio[~relabeled].mean().item()
        return ratios

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates, "iterations": self.iterations}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.iterations = state["updates"], state["iterations"]
