"""What SAC-GLAM's training script builds from its config: the loss (LLM agent, twin critic heads,
``DiscreteSACLoss``) in one call, the replay and the episode processing it learns from, the
autotelic goal choice."""

from __future__ import annotations

from torchrl.envs import EnvBase

from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
from torchrl_glam.data.autotelic import AutotelicGoals
from torchrl_glam.data.her import HindsightRelabel
from torchrl_glam.data.noop_twins import NoOpTwins
from torchrl_glam.data.nstep import NStepReturns
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.modules import GLAMAgent
from torchrl_glam.objectives.sac_glam import SACGLAMLoss
from torchrl_glam.training.checkpoint import load_checkpoint
from torchrl_glam.training.factories import loss_arguments, make_env, make_glam_agent


def make_loss(cfg: SACGLAMConfig, num_actions: int, agent: GLAMAgent | None = None) -> SACGLAMLoss:
    """The SAC-GLAM loss of ``cfg`` in one call: the twin critic heads and their ``DiscreteSACLoss``
    over ``agent`` (its LLM and actor; default a new one of ``cfg``), every loss argument taken
    from the config field of the same name."""
    agent = make_glam_agent(cfg) if agent is None else agent
    return SACGLAMLoss(agent, num_actions=num_actions, **loss_arguments(SACGLAMLoss, cfg)).to(cfg.model.device)


def load_trained_loss(run_dir) -> tuple[SACGLAMConfig, SACGLAMLoss, int]:
    """A SAC-GLAM run's config, its loss (agent and critics) with the weights of the run's checkpoint, and the
    environment steps the checkpoint was taken at: what an analysis of a trained run starts from."""
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
    """The candidates per step of an environment of ``cfg.env.name``."""
    return cfg.environment.num_actions(env)


def make_goal_choice(cfg: SACGLAMConfig, env: EnvBase) -> AutotelicGoals | None:
    """The autotelic agent's goal choice for ``env`` (wrap it: ``TransformedEnv(env, choice)``),
    or ``None`` when ``autotelic="off"`` (the environment samples the task set's goals)."""
    if cfg.algorithm.autotelic == "off":
        return None
    return AutotelicGoals(
        env.num_envs,
        env.num_objects,
        strategy=cfg.algorithm.autotelic,
        epsilon=cfg.algorithm.lp_epsilon,
        window=cfg.algorithm.lp_window,
        groups=cfg.algorithm.lp_groups,
        seed=env.seed_value,
        task_set=env.goals,
        environment=cfg.environment,
    )


def make_replay(cfg: SACGLAMConfig) -> GoalReplay:
    environment = cfg.environment
    catalogue = environment.catalogue
    strategy = cfg.replay.batch_strategy if cfg.replay.her or cfg.replay.batch_strategy != "ratio" else "uniform"
    weights = None
    if cfg.replay.batch_strategy == "prior":
        weights = GoalReplay.type_proportions(catalogue.goal_set(cfg.env.goals), environment=environment)
    elif cfg.replay.batch_strategy == "types_uniform":  # App. E's per-type buffers, every type equally often
        weights, strategy = [1.0] * len(environment.goal_types), "prior"
    return GoalReplay(
        capacity=cfg.replay.buffer_capacity,
        strategy=strategy,
        her_ratio=cfg.replay.her_ratio,
        goal_type_weights=weights,
        prioritized=cfg.replay.prioritized,
        alpha=cfg.replay.per_alpha,
        beta=cfg.replay.per_beta,
        environment=environment,
    )


def make_episode_processing(cfg: SACGLAMConfig):
    """Finished episodes -> (HER) -> (no-op twins) -> n-step transitions: the three steps, ``None``
    for one switched off."""
    her = None
    if cfg.replay.her:
        her = HindsightRelabel(
            cfg.replay.her_max_per_episode,
            seed=cfg.run.seed,
            negatives_per_episode=cfg.replay.her_negatives,
            negatives_from=cfg.replay.her_negatives_from,
            twins=cfg.replay.her_twins,
            goal_ids=cfg.environment.catalogue.goal_set(cfg.env.goals),
            environment=cfg.environment,
        )
    twins = NoOpTwins(seed=cfg.run.seed, environment=cfg.environment) if cfg.replay.noop_twins else None
    return (
        her,
        twins,
        NStepReturns(
            cfg.algorithm.n_step, cfg.algorithm.gamma, cfg.algorithm.bootstrap_time_limit, environment=cfg.environment
        ),
    )
