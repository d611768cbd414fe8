"""What GRPO-GLAM's training script builds from its config: the loss (LLM agent, clipped PPO
objective without a critic, the optional KL to the initial policy) in one call."""

from __future__ import annotations

from torchrl_glam.algorithms.grpo_glam.config import GRPOGLAMConfig
from torchrl_glam.modules import GLAMAgent
from torchrl_glam.objectives.grpo_glam import GRPOGLAMLoss
from torchrl_glam.training.factories import make_glam_agent


def make_loss(cfg: GRPOGLAMConfig, agent: GLAMAgent | None = None) -> GRPOGLAMLoss:
    """The GRPO-GLAM loss of ``cfg`` over ``agent`` (default a new one of ``cfg``).

    Args:
        cfg (GRPOGLAMConfig): the run's config.
        agent (GLAMAgent | None): the LLM agent; default :func:`~torchrl_glam.training.factories.make_glam_agent` of
            ``cfg``.

    Returns:
        The :class:`~torchrl_glam.objectives.grpo_glam.GRPOGLAMLoss`, on ``cfg.model.device``.

    Examples:
        >>> from torchrl_glam.algorithms.grpo_glam.build import make_loss
        >>> from torchrl_glam.algorithms.grpo_glam.config import make_grpo_config
        >>> loss = make_loss(make_grpo_config("smoke", {"algorithm.step_level": True}))
        >>> type(loss).__name__, loss.group_size, loss.step_level, list(loss.param_groups())
        ('GRPOGLAMLoss', 2, True, ['llm'])
    """
    agent = make_glam_agent(cfg) if agent is None else agent
    algorithm = cfg.algorithm
    loss = GRPOGLAMLoss(
        agent,
        group_size=algorithm.group_size,
        clip_epsilon=algorithm.clip_epsilon,
        entropy_coeff=algorithm.entropy_coeff,
        kl_coeff=algorithm.kl_coeff,
        step_level=algorithm.step_level,
        step_weight=algorithm.step_weight,
        gamma=algorithm.gamma,
        eps=algorithm.eps,
        environment=cfg.environment,
    )
    return loss.to(cfg.model.device)
