"""GRPO-GLAM's update (:class:`GRPOGLAMUpdater`): group-relative advantages of complete groups, then
epochs x minibatches of the clipped objective, Adam, gradient clipping."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase

from torchrl_glam.algorithms.grpo_glam.config import GRPOGLAMConfig
from torchrl_glam.objectives.grpo_glam import REFERENCE_SCORES_KEY, GRPOGLAMLoss
from torchrl_glam.training.distributed import all_max, all_true, rank_share
from torchrl_glam.training.factories import check_finite, gradient_step

#: the losses summed into the gradient step
LOSSES = ("loss_objective", "loss_entropy", "loss_kl")


class GRPOGLAMUpdater:
    """One update per ``groups_per_update`` complete groups: advantages, then ``epochs`` passes over
    the groups' steps in minibatches of ``minibatch_size``, each an Adam step on the summed losses
    after gradient clipping at ``max_grad_norm``.

    Args:
        loss (GRPOGLAMLoss): the :class:`~torchrl_glam.objectives.grpo_glam.GRPOGLAMLoss`.
        cfg (GRPOGLAMConfig): the run's config.
        world (int): the number of data-parallel ranks (each holds its share of the groups and of every minibatch).
    """

    def __init__(self, loss: GRPOGLAMLoss, cfg: GRPOGLAMConfig, world: int = 1) -> None:
        self.loss, self.cfg = loss, cfg
        self.minibatch_size = rank_share(cfg, "minibatch_size", world)
        self.groups_per_update = rank_share(cfg, "groups_per_update", world)
        self.parameters = loss.parameters_to_train()
        self.optimizer = torch.optim.Adam(self.parameters, lr=cfg.algorithm.lr)
        self.optimizers = {"algorithm.lr": self.optimizer}  # by learning-rate field (a resume may change it)
        self.updates = 0  # gradient steps
        self.iterations = 0  # updates of groups

    def ready(self, complete_groups: int) -> bool:
        """Whether every rank holds its share of ``groups_per_update`` complete groups."""
        return all_true(complete_groups >= self.groups_per_update)

    def update_data(self, groups: TensorDictBase) -> TensorDictBase:
        """The flat steps [N] of complete groups [groups x G, T] with their "advantage" (and the
        initial policy's scores with a KL)."""
        keys = self.loss.tensor_keys
        data = self.loss.advantages(groups)
        extra = [REFERENCE_SCORES_KEY] if self.loss.kl_coeff > 0 else []
        kept = (*self.loss.environment.state_keys, keys.action, keys.sample_log_prob, keys.advantage, *extra)
        return data[data[keys.mask]].select(*kept)

    def update(self, groups: TensorDictBase) -> list[dict[str, float]]:
        """Runs the update on complete groups.

        Args:
            groups (TensorDictBase): their episodes [groups x G, T]
                (:meth:`~torchrl_glam.algorithms.grpo_glam.groups.Groups.take`).

        Returns:
            Each gradient step's metrics (the losses, "entropy", "clip_fraction", "ratio",
            "kl_to_initial", "grad_norm"; the first also "update/groups", "update/transitions" and
            "update/equal_return_groups").
        """
        data = self.update_data(groups)
        num_minibatches = all_max(math.ceil(len(data) / self.minibatch_size))  # the same steps on every rank
        keys = [*LOSSES, "entropy", "kl_approx", "clip_fraction", "ratio", "kl_to_initial"]
        metrics = []
        for _ in range(self.cfg.algorithm.epochs):
            for indices in torch.randperm(len(data)).tensor_split(num_minibatches):
                out = self.loss(data[indices])
                loss = sum(out[k] for k in LOSSES)
                check_finite(loss, out, LOSSES, f"gradient step {self.updates}")
                grad_norm = gradient_step(self.optimizer, self.parameters, loss, self.cfg.algorithm.max_grad_norm)
                self.updates += 1
                metrics.append({**{k: out[k].item() for k in keys}, "grad_norm": grad_norm.item()})
        self.iterations += 1
        metrics[0].update(self._group_metrics(groups, len(data)))
        return metrics

    def _group_metrics(self, groups: TensorDictBase, transitions: int) -> dict[str, float]:
        """The update's size, and the share of groups whose returns are all equal (their episodes
        get no advantage: GRPO learns nothing from a group that all failed or all succeeded)."""
        returns = (groups["next", "reward"] * groups["mask"]).sum(-1).reshape(-1, self.loss.group_size)
        equal = (returns == returns[:, :1]).all(-1)
        return {
            "update/transitions": float(transitions),
            "update/groups": float(len(returns)),
            "update/equal_return_groups": equal.float().mean().item(),
        }

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates, "iterations": self.iterations}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.iterations = state["updates"], state["iterations"]
