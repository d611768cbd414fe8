"""What PPO-GLAM's training script builds from its config: the value head and the loss (LLM agent,
value head, PPO loss) in one call."""

from __future__ import annotations

from torchrl_glam.algorithms.ppo_glam.config import PPOGLAMConfig
from torchrl_glam.modules import GLAMAgent, make_value_head
from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.training.factories import make_glam_agent


def make_loss(cfg: PPOGLAMConfig, agent: GLAMAgent | None = None) -> PPOGLAMLoss:
    """The PPO-GLAM loss of ``cfg`` in one call: the value head (``value_width``) handed to the PPO
    loss (clipped or KL-penalised) over ``agent`` (default a new one of ``cfg``).

    Examples:
        >>> from torchrl_glam.algorithms.ppo_glam.build import make_loss
        >>> from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
        >>> cfg = make_ppo_config("smoke")
        >>> loss = make_loss(cfg)
        >>> type(loss).__name__, cfg.algorithm.ppo_loss  # "clip": ClipPPOLoss; "kl": KLPENPPOLoss
        ('PPOGLAMLoss', 'clip')
        >>> list(loss.param_groups())
        ['llm', 'heads']
    """
    agent = make_glam_agent(cfg) if agent is None else agent
    algorithm = cfg.algorithm
    loss = PPOGLAMLoss(
        agent,
        make_value_head(agent.llm.hidden_size, algorithm.value_width),
        clip_epsilon=algorithm.clip_epsilon,
        entropy_coeff=algorithm.entropy_coeff,
        critic_coeff=algorithm.critic_coeff,
        gamma=algorithm.gamma,
        gae_lambda=algorithm.gae_lambda,
        ppo_loss=algorithm.ppo_loss,
        centred=cfg.hindsight.her_centred,
        kl_coeff=algorithm.kl_coeff,
        kl_target=algorithm.kl_target,
        clip_value=algorithm.clip_value,
        normalize_advantage=algorithm.normalize_advantage,
        bootstrap_time_limit=algorithm.bootstrap_time_limit,
        environment=cfg.environment,
    )
    return loss.to(cfg.model.device)
