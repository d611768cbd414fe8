"""The ``make_*`` factories of the SAC-GLAM script, and the two things it does at every step:
acting (:func:`act`) and the gradient update (:class:`SACGLAMUpdater`)."""
from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from torchrl.modules import MaskedCategorical

from torchrl_glam.data.her import HindsightRelabel
from torchrl_glam.data.nstep import NStepReturns
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.envs import GoalCatalogue, PlaygroundTextEnv
from torchrl_glam.modules import MASKED_LOGIT, LLMConfig, LLMScorer, make_scorer
from torchrl_glam.objectives.common import render_observations
from torchrl_glam.objectives.ppo_glam import BEHAVIOUR_SCORES_KEY
from torchrl_glam.objectives.sac_glam import SACGLAMLoss
from torchrl_glam.training.config import GLAMConfig, SACGLAMConfig
from torchrl_glam.training.distributed import all_true, average_gradients


class NonFiniteLossError(RuntimeError):
    """A loss became NaN or infinite: the run stops, the last good checkpoint stays."""


def make_env(cfg: GLAMConfig, num_envs: int | None = None, goals: str | None = None,
             seed: int | None = None, **kwargs) -> PlaygroundTextEnv:
    """The training environment (tensors only: prompts are rendered for the LLM from the state)."""
    return PlaygroundTextEnv(
        num_envs=num_envs or cfg.num_envs,
        num_objects=cfg.num_objects,
        goals=goals or cfg.goals,
        max_steps=cfg.max_steps,
        seed=cfg.seed if seed is None else seed,
        text=False,
        **kwargs,
    )


def make_eval_envs(cfg: GLAMConfig) -> dict[str, PlaygroundTextEnv]:
    """The greedy-evaluation environments: goal types sampled uniformly over the training set, and
    the held-out goals, each with ``eval_episodes`` sub-environments and fixed seeds, so that every
    algorithm of a comparison is evaluated on the same episodes."""
    return {
        "train": make_env(cfg, num_envs=cfg.eval_episodes, seed=10_000 + cfg.seed, goal_sampling="by_type"),
        "held_out": make_env(cfg, num_envs=cfg.eval_episodes, goals="held_out", seed=20_000 + cfg.seed),
    }


def make_scorer_from_config(cfg: GLAMConfig) -> LLMScorer:
    llm = LLMConfig(
        name_or_path=cfg.model,
        dtype=cfg.dtype,
        device=cfg.device,
        lora_rank=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        quantization=cfg.quantization,
    )
    return make_scorer(llm, normalization=cfg.normalization, tokenization=cfg.tokenization).module


def make_agent(cfg: SACGLAMConfig, num_actions: int) -> SACGLAMLoss:
    """The LLM scorer, the actor, the twin critic heads and their ``DiscreteSACLoss``."""
    return SACGLAMLoss(
        make_scorer_from_config(cfg),
        num_actions=num_actions,
        critic_input=cfg.critic_input,
        critic_backprop=cfg.critic_backprop,
        critic_width=cfg.critic_width,
        gamma=cfg.gamma,
        alpha_init=cfg.alpha_init,
        target_entropy=cfg.target_entropy,
    ).to(cfg.device)


def make_replay(cfg: SACGLAMConfig) -> GoalReplay:
    catalogue = GoalCatalogue.default()
    weights = GoalReplay.type_proportions(catalogue.goal_set(cfg.goals)) if cfg.batch_strategy == "prior" else None
    strategy = cfg.batch_strategy if cfg.her or cfg.batch_strategy != "ratio" else "uniform"
    return GoalReplay(
        capacity=cfg.buffer_capacity,
        strategy=strategy,
        her_ratio=cfg.her_ratio,
        goal_type_weights=weights,
        prioritized=cfg.prioritized,
        alpha=cfg.per_alpha,
        beta=cfg.per_beta,
    )


def make_episode_processing(cfg: SACGLAMConfig):
    """Finished episodes -> (HER) -> n-step transitions."""
    her = HindsightRelabel(cfg.her_max_per_episode, seed=cfg.seed) if cfg.her else None
    return her, NStepReturns(cfg.n_step, cfg.gamma)


@torch.no_grad()
def act(agent, td: TensorDictBase, greedy: bool = False, with_log_prob: bool = False) -> TensorDictBase:
    """Writes "action" into an environment tensordict: a sample of the policy (or its mode), and
    with ``with_log_prob`` its log-probability ("sample_log_prob") and the candidates' scores
    ("behaviour_scores"), the behaviour policy PPO needs. ``agent`` is any objective holding a
    ``scorer`` and a ``catalogue`` (SAC-GLAM or PPO-GLAM)."""
    prompts, actions, _ = render_observations(
        td["goal_id"], td["objects"], td["agent_on"], td["held"], td["grown"], agent.catalogue
    )
    mask = td["action_mask"]
    device = next(agent.scorer.parameters()).device
    scores = agent.scorer(prompts, actions, mask.to(device))[0].cpu()
    if greedy:
        return td.set("action", scores.masked_fill(~mask, -math.inf).argmax(-1))
    dist = MaskedCategorical(logits=scores, mask=mask, neg_inf=MASKED_LOGIT)
    action = dist.sample()
    td.set("action", action)
    if with_log_prob:
        td.set("sample_log_prob", dist.log_prob(action))
        td.set(BEHAVIOUR_SCORES_KEY, scores)
    return td


class SACGLAMUpdater:
    """One gradient step of SAC-GLAM: losses, optimisers, soft target update, priorities.

    Adam on the LLM (``actor_lr``: it receives the actor loss and, with ``critic_backprop``, the
    critic loss), on the heads (``critic_lr``) and on log-alpha (``alpha_lr``). During the first
    ``warmup_updates`` only the heads learn (see ``objectives/sac_glam.py``).
    """

    def __init__(self, agent: SACGLAMLoss, replay: GoalReplay, cfg: SACGLAMConfig) -> None:
        self.agent, self.replay, self.cfg = agent, replay, cfg
        self.llm_optimizer = torch.optim.Adam(agent.llm_parameters(), lr=cfg.actor_lr)
        self.critic_optimizer = torch.optim.Adam(agent.head_parameters(), lr=cfg.critic_lr)
        self.alpha_optimizer = torch.optim.Adam([agent.sac.log_alpha], lr=cfg.alpha_lr)
        self.target_updater = agent.make_target_updater(cfg.tau)
        self.parameters = agent.llm_parameters() + agent.head_parameters() + [agent.sac.log_alpha]
        self.updates = 0

    def step(self, batch_size: int | None = None) -> dict[str, float]:
        batch = self.replay.sample(batch_size or self.cfg.batch_size)
        warmup = self.updates < self.cfg.warmup_updates
        out = self.agent(batch, warmup=warmup)
        loss = out["loss_qvalue"] if warmup else out["loss_qvalue"] + out["loss_actor"] + out["loss_alpha"]
        if not all_true(torch.isfinite(loss).item()):  # every rank stops together
            raise NonFiniteLossError(
                f"non-finite loss at update {self.updates}: "
                + ", ".join(f"{k}={out[k].item():.4g}" for k in ("loss_qvalue", "loss_actor", "loss_alpha"))
            )
        optimizers = [self.critic_optimizer] if warmup else [self.critic_optimizer, self.llm_optimizer, self.alpha_optimizer]
        for optimizer in (self.critic_optimizer, self.llm_optimizer, self.alpha_optimizer):
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(self.parameters)  # data parallel: the same step on every rank
        if self.cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters[:-1], self.cfg.max_grad_norm)
        for optimizer in optimizers:
            optimizer.step()
        self.target_updater.step()
        self.replay.update_priority(batch, out["td_error"])
        self.updates += 1
        metrics = {k: out[k].item() for k in ("loss_qvalue", "loss_actor", "loss_alpha", "alpha", "entropy", "q_value")}
        metrics["warmup"] = float(warmup)
        metrics["batch_relabeled"] = float(batch["relabeled"].float().mean())
        metrics["batch_collected_at"] = float(batch["collected_at"].float().mean())
        return metrics

    def state_dict(self) -> dict:
        return {
            "llm_optimizer": self.llm_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.llm_optimizer.load_state_dict(state["llm_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.updates = state["updates"]
