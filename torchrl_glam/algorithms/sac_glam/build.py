"""What SAC-GLAM's training script builds from its config: the critic heads and the loss (LLM
agent, twin critic heads, ``DiscreteSACLoss``) in one call, the replay and the episode processing it learns from, the
autotelic goal choice."""

from __future__ import annotations

import numpy as np
from torchrl.envs import EnvBase

from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.data.autotelic import AutotelicGoals
from torchrl_glam.data.her import HindsightRelabel
from torchrl_glam.data.noop_twins import NoOpTwins
from torchrl_glam.data.nstep import NStepReturns
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.envs.protocol import GoalCatalogueLike
from torchrl_glam.modules import GLAMAgent, make_critic_heads
from torchrl_glam.objectives.sac_glam import SUCCESS_LOGIT_KEY, SACGLAMLoss
from torchrl_glam.training.checkpoint import load_checkpoint
from torchrl_glam.training.factories import make_env, make_glam_agent


def make_heads(cfg: SACGLAMConfig, hidden_size: int, num_actions: int):
    """The critic's Q-value head (App. B-C: ``critic_input``, ``critic_width``, ``critic_dueling``),
    from which ``DiscreteSACLoss`` makes the twin heads and their targets, and the
    immediate-success head (``None`` without ``success_loss_coef``)."""
    algorithm = cfg.algorithm
    qvalue = make_critic_heads(
        hidden_size,
        algorithm.critic_input,
        num_actions,
        width=algorithm.critic_width,
        dueling=algorithm.critic_dueling,
    )
    success = None
    if algorithm.success_loss_coef > 0:  # the Q-heads' design, not dueling: one logit per candidate
        success = make_critic_heads(
            hidden_size, algorithm.critic_input, num_actions, width=algorithm.critic_width, out_key=SUCCESS_LOGIT_KEY
        )
    return qvalue, success


def make_loss(cfg: SACGLAMConfig, num_actions: int, agent: GLAMAgent | None = None) -> SACGLAMLoss:
    """The SAC-GLAM loss of ``cfg`` in one call: the critic heads (:func:`make_heads`) handed to
    ``SACGLAMLoss`` over ``agent`` (its LLM and actor; default a new one of ``cfg``).

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.build import make_loss
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> loss = make_loss(make_config("smoke"), num_actions=5)
        >>> type(loss).__name__, type(loss.glam_agent).__name__
        ('SACGLAMLoss', 'GLAMAgent')
        >>> list(loss.param_groups())  # one optimiser each
        ['llm', 'heads', 'alpha']
    """
    agent = make_glam_agent(cfg) if agent is None else agent
    algorithm = cfg.algorithm
    qvalue_network, success_network = make_heads(cfg, agent.llm.hidden_size, num_actions)
    loss = SACGLAMLoss(
        agent,
        qvalue_network,
        num_actions=num_actions,
        critic_backprop=algorithm.critic_backprop,
        gamma=algorithm.gamma,
        alpha_init=algorithm.alpha_init,
        target_entropy=algorithm.target_entropy,
        target_llm=algorithm.target_llm,
        success_network=success_network,
        success_loss_coef=algorithm.success_loss_coef,
        critic_loss=algorithm.critic_loss,
        environment=cfg.environment,
    )
    return loss.to(cfg.model.device)


def load_trained_loss(run_dir) -> tuple[SACGLAMConfig, SACGLAMLoss, int]:
    """A SAC-GLAM run's config, its loss (agent and critics) with the weights of the run's checkpoint, and the
    environment steps the checkpoint was taken at: what an analysis of a trained run starts from.

    Examples:
        >>> import os, tempfile
        >>> from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
        >>> from torchrl_glam.algorithms.sac_glam.train import main
        >>> run_dir = os.path.join(tempfile.mkdtemp(), "run")
        >>> main(["--preset", "smoke", "--run-dir", run_dir, "total_steps=16", "eval_every=16", "eval_episodes=2"])
        training to 16 environment steps in ...
        done: 16 steps, ...
        0
        >>> cfg, loss, steps = load_trained_loss(run_dir)
        >>> type(cfg).__name__, type(loss).__name__, steps
        ('SACGLAMConfig', 'SACGLAMLoss', 16)
    """
    state = load_checkpoint(run_dir)
    if state is None:
        raise FileNotFoundError(
            f"no checkpoint in {run_dir}: pass the --run-dir of a SAC-GLAM run that has "
            "written one (every checkpoint_every steps, and at its end)"
        )
    cfg = SACGLAMConfig.from_dict(state["config"])
    loss = make_loss(cfg, num_actions=num_actions(cfg, make_env(cfg, num_envs=1)))
    loss.load_trainable_state_dict(state["loss"])
    return cfg, loss, state["assembler"]["env_steps"]


def num_actions(cfg: SACGLAMConfig, env: EnvBase) -> int:
    """The candidates per step of an environment of ``cfg.env.name``.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.build import num_actions
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import make_env
        >>> cfg = make_config("smoke")
        >>> num_actions(cfg, make_env(cfg))  # 3 objects' "Go to", "Grasp", "Release"
        5
    """
    return cfg.environment.num_actions(env)


def make_goal_choice(cfg: SACGLAMConfig, env: EnvBase) -> AutotelicGoals | None:
    """The autotelic agent's goal choice for ``env`` (wrap it: ``TransformedEnv(env, choice)``),
    or ``None`` when ``autotelic="off"`` (the environment samples the task set's goals)."""
    algorithm = cfg.algorithm
    if algorithm.autotelic == "off":
        return None
    return AutotelicGoals(
        env.num_envs,
        env.num_objects,
        strategy=algorithm.autotelic,
        epsilon=algorithm.lp_epsilon,
        window=algorithm.lp_window,
        groups=algorithm.lp_groups,
        seed=env.seed_value,
        task_set=env.goals,
        environment=cfg.environment,
    )


def make_replay(cfg: SACGLAMConfig) -> GoalReplay:
    environment, replay, hindsight = cfg.environment, cfg.replay, cfg.hindsight
    catalogue = environment.catalogue
    strategy = replay.batch_strategy or ("ratio" if hindsight.her else "uniform")
    weights = None
    if replay.batch_strategy == "prior":
        weights = GoalReplay.type_proportions(catalogue.goal_set(cfg.env.goals), environment=environment)
    elif replay.batch_strategy == "types_uniform":  # App. E's per-type buffers, every type equally often
        weights, strategy = [1.0] * len(environment.goal_types), "prior"
    return GoalReplay(
        capacity=replay.buffer_capacity,
        strategy=strategy,
        her_ratio=hindsight.her_ratio,
        goal_type_weights=weights,
        prioritized=replay.prioritized,
        alpha=replay.per_alpha,
        beta=replay.per_beta,
        eps=replay.per_eps,
        weight_norm=replay.per_weight_norm,
        environment=environment,
    )


def relabel_goals(catalogue: GoalCatalogueLike, training_goals: np.ndarray, her_goals: str) -> np.ndarray | None:
    """The goals HER may relabel with, for ``hindsight.her_goals``: ``None`` (every reported goal),
    the training goal set, or every goal of the training goal set's types."""
    if her_goals == "training":
        return training_goals
    if her_goals == "training_types":
        return np.flatnonzero(np.isin(catalogue.goal_type, catalogue.goal_type[training_goals]))
    return None


def make_episode_processing(cfg: SACGLAMConfig):
    """Finished episodes -> (HER) -> (no-op twins) -> n-step transitions: the three steps, ``None``
    for one switched off."""
    environment, hindsight, replay, algorithm = cfg.environment, cfg.hindsight, cfg.replay, cfg.algorithm
    her = None
    if hindsight.her:
        training_goals = environment.catalogue.goal_set(cfg.env.goals)
        her = HindsightRelabel(
            hindsight.her_max_per_episode,
            seed=cfg.run.seed,
            negatives_per_episode=hindsight.her_negatives,
            negatives_from=hindsight.her_negatives_from,
            twins=hindsight.her_twins,
            goal_ids=training_goals,
            environment=environment,
            relabel_goals=relabel_goals(environment.catalogue, training_goals, hindsight.her_goals),
        )
    twins = NoOpTwins(seed=cfg.run.seed, environment=environment) if replay.noop_twins else None
    nstep = NStepReturns(algorithm.n_step, algorithm.gamma, algorithm.bootstrap_time_limit, environment=environment)
    return her, twins, nstep
