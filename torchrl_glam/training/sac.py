"""SAC-GLAM's side of training: the agent factory (LLM scorer + actor + twin heads + loss), the
replay and episode processing it learns from, and the gradient update (:class:`SACGLAMUpdater`).
PPO-GLAM's counterpart is ``ppo.py``; what both share is ``factories.py``."""

from __future__ import annotations

import torch
from torchrl.envs import EnvBase

from torchrl_glam.data.autotelic import AutotelicGoals
from torchrl_glam.data.her import HindsightRelabel
from torchrl_glam.data.noop_twins import NoOpTwins
from torchrl_glam.data.nstep import NStepReturns
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.modules import GLAMAgent
from torchrl_glam.objectives.sac_glam import SACGLAMLoss
from torchrl_glam.training.checkpoint import load_checkpoint
from torchrl_glam.training.distributed import all_true, average_gradients, rank_share
from torchrl_glam.training.factories import NonFiniteLossError, make_env, make_glam_agent
from torchrl_glam.training.sac_config import SACGLAMConfig


def make_agent(cfg: SACGLAMConfig, num_actions: int) -> SACGLAMLoss:
    """The SAC-GLAM loss around a new agent of ``cfg`` (its ``glam_agent``):
    ``make_sac_loss(cfg, make_glam_agent(cfg), num_actions)``."""
    return make_sac_loss(cfg, make_glam_agent(cfg), num_actions)


def make_sac_loss(cfg: SACGLAMConfig, agent: GLAMAgent, num_actions: int) -> SACGLAMLoss:
    """The twin critic heads and their ``DiscreteSACLoss`` over ``agent`` (its LLM and actor)."""
    return SACGLAMLoss(
        agent,
        num_actions=num_actions,
        critic_input=cfg.critic_input,
        critic_backprop=cfg.critic_backprop,
        critic_width=cfg.critic_width,
        gamma=cfg.gamma,
        alpha_init=cfg.alpha_init,
        target_entropy=cfg.target_entropy,
        target_llm=cfg.target_llm,
        success_loss_coef=cfg.success_loss_coef,
        critic_dueling=cfg.critic_dueling,
    ).to(cfg.device)


def load_trained_agent(run_dir) -> tuple[SACGLAMConfig, SACGLAMLoss, int]:
    """A SAC-GLAM run's config, its agent with the weights of the run's checkpoint, and the
    environment steps the checkpoint was taken at: what an analysis of a trained run starts from."""
    state = load_checkpoint(run_dir)
    if state is None:
        raise FileNotFoundError(
            f"no checkpoint in {run_dir}: pass the --run-dir of a SAC-GLAM run that has "
            "written one (every checkpoint_every steps, and at its end)"
        )
    cfg = SACGLAMConfig.from_dict(state["config"])
    agent = make_agent(cfg, num_actions=num_actions(cfg, make_env(cfg, num_envs=1)))
    agent.load_trainable_state_dict(state["agent"])
    return cfg, agent, state["assembler"]["env_steps"]


def num_actions(cfg: SACGLAMConfig, env: EnvBase) -> int:
    """The candidates per step of an environment of ``cfg.env``."""
    return cfg.environment.num_actions(env)


def make_goal_choice(cfg: SACGLAMConfig, env: EnvBase) -> AutotelicGoals | None:
    """The autotelic agent's goal choice for ``env`` (wrap it: ``TransformedEnv(env, choice)``),
    or ``None`` when ``autotelic="off"`` (the environment samples the task set's goals)."""
    if cfg.autotelic == "off":
        return None
    return AutotelicGoals(
        env.num_envs,
        env.num_objects,
        strategy=cfg.autotelic,
        epsilon=cfg.lp_epsilon,
        window=cfg.lp_window,
        groups=cfg.lp_groups,
        seed=env.seed_value,
        task_set=env.goals,
        environment=cfg.environment,
    )


def make_replay(cfg: SACGLAMConfig) -> GoalReplay:
    environment = cfg.environment
    catalogue = environment.catalogue
    strategy = cfg.batch_strategy if cfg.her or cfg.batch_strategy != "ratio" else "uniform"
    weights = None
    if cfg.batch_strategy == "prior":
        weights = GoalReplay.type_proportions(catalogue.goal_set(cfg.goals), environment=environment)
    elif cfg.batch_strategy == "types_uniform":  # App. E's per-type buffers, every type equally often
        weights, strategy = [1.0] * len(environment.goal_types), "prior"
    return GoalReplay(
        capacity=cfg.buffer_capacity,
        strategy=strategy,
        her_ratio=cfg.her_ratio,
        goal_type_weights=weights,
        prioritized=cfg.prioritized,
        alpha=cfg.per_alpha,
        beta=cfg.per_beta,
        environment=environment,
    )


def make_episode_processing(cfg: SACGLAMConfig):
    """Finished episodes -> (HER) -> (no-op twins) -> n-step transitions: the three steps, ``None``
    for one switched off."""
    her = None
    if cfg.her:
        her = HindsightRelabel(
            cfg.her_max_per_episode,
            seed=cfg.seed,
            negatives_per_episode=cfg.her_negatives,
            negatives_from=cfg.her_negatives_from,
            twins=cfg.her_twins,
            goal_ids=cfg.environment.catalogue.goal_set(cfg.goals),
            environment=cfg.environment,
        )
    twins = NoOpTwins(seed=cfg.seed, environment=cfg.environment) if cfg.noop_twins else None
    return her, twins, NStepReturns(cfg.n_step, cfg.gamma, cfg.bootstrap_time_limit, environment=cfg.environment)


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

    def __init__(self, agent: SACGLAMLoss, replay: GoalReplay, cfg: SACGLAMConfig, world: int = 1) -> None:
        self.agent, self.replay, self.cfg = agent, replay, cfg
        self.batch_size = rank_share(cfg, "batch_size", world)  # this rank's share of every batch
        groups = agent.param_groups()  # "llm", "heads", "alpha"
        self.llm_optimizer = torch.optim.Adam(groups["llm"], lr=cfg.actor_lr)
        self.critic_optimizer = torch.optim.Adam(groups["heads"], lr=cfg.critic_lr)
        self.alpha_optimizer = torch.optim.Adam(groups["alpha"], lr=cfg.alpha_lr)
        # two Adams on one set of weights: each keeps its own moments, so each loss moves the LLM at
        # its own rate (one Adam normalises the summed gradient: a scale on a loss cannot do it)
        self.critic_llm_optimizer = (
            torch.optim.Adam(groups["llm"], lr=cfg.critic_llm_lr) if cfg.critic_llm_lr is not None else None
        )
        self.llm_parameters = groups["llm"]
        self.target_updater = agent.make_target_updater(cfg.tau)
        self.parameters = groups["llm"] + groups["heads"] + groups["alpha"]  # gradients averaged across ranks
        self.clipped = groups["llm"] + groups["heads"]  # gradient-norm clipping: not alpha
        #: each optimizer under the config field of its learning rate (a resume may change them)
        self.optimizers = {
            "actor_lr": self.llm_optimizer,
            "critic_lr": self.critic_optimizer,
            "alpha_lr": self.alpha_optimizer,
        }
        self.updates = 0

    def step(self, batch_size: int | None = None, env_steps: int | None = None) -> dict[str, float]:
        """One update on a batch from replay; ``env_steps`` (the run's) sets the LLM's rates."""
        if env_steps is not None:
            self.set_llm_learning_rates(env_steps)
        batch = self.replay.sample(batch_size or self.batch_size)
        warmup = self.updates < self.cfg.warmup_updates
        with self.agent.warming_up(warmup):
            out = self.agent(batch)
        critic_loss = out["loss_qvalue"] + out["loss_success"]
        loss = critic_loss if warmup else critic_loss + out["loss_actor"] + out["loss_alpha"]
        if not all_true(torch.isfinite(loss).item()):  # every rank stops together
            raise NonFiniteLossError(
                f"non-finite loss at update {self.updates}: "
                + ", ".join(
                    f"{k}={out[k].item():.4g}" for k in ("loss_qvalue", "loss_actor", "loss_alpha", "loss_success")
                )
            )
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
        if self.agent.success_head is not None:
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
        decay_at = self.cfg.actor_lr_decay_at
        scale = self.cfg.actor_lr_decay if decay_at is not None and env_steps >= decay_at else 1.0
        for optimizer, rate in (
            (self.llm_optimizer, self.cfg.actor_lr),
            (self.critic_llm_optimizer, self.cfg.critic_llm_lr),
        ):
            if optimizer is not None:
                for group in optimizer.param_groups:
                    group["lr"] = rate * scale

    def _apply(self, optimizers: list[torch.optim.Optimizer], parameters: list | None = None) -> None:
        """Averages the gradients over ranks (data parallel: the same step on every rank), clips
        them, and steps ``optimizers``."""
        average_gradients(parameters or self.parameters)
        if self.cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(parameters or self.clipped, self.cfg.max_grad_norm)
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
