"""What every GLAM training script builds the same way: the environments (and the check of one,
:func:`check_env`), the scorer from a config, the policy module of an agent and acting with it
(:func:`act`), the non-finite-loss check (:func:`check_finite`) and a clipped data-parallel
optimiser step (:func:`gradient_step`).

Each algorithm builds its own loss, replay and updater from these in its folder
(``torchrl_glam/algorithms/<algorithm>/``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictSequential
from torchrl.envs import EnvBase

from torchrl_glam.envs.keys import ACHIEVED_GOAL_COUNT_KEY, ACHIEVED_GOAL_IDS_KEY, ACTION_MASK_KEY
from torchrl_glam.envs.registry import environment_error
from torchrl_glam.modules import GLAMAgent, LLMConfig, LLMScorer, make_scorer
from torchrl_glam.training.config import GLAMConfig
from torchrl_glam.training.distributed import all_true, average_gradients
from torchrl_glam.training.eval_sets import EVAL_SETS


class NonFiniteLossError(RuntimeError):
    """A loss became NaN or infinite: the run stops, the last good checkpoint stays."""


def check_finite(loss: torch.Tensor, out: TensorDictBase, terms: Sequence[str], at: str) -> None:
    """Raises :class:`NonFiniteLossError` on every rank together when ``loss`` is NaN or infinite on
    any rank, naming ``out``'s loss ``terms`` and where it happened (``at``: "update 12")."""
    if not all_true(torch.isfinite(loss).item()):
        raise NonFiniteLossError(f"non-finite loss at {at}: " + ", ".join(f"{k}={out[k].item():.4g}" for k in terms))


def gradient_step(
    optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor], loss: torch.Tensor, max_grad_norm: float | None
) -> torch.Tensor:
    """One optimiser step on ``loss``: backward, gradients averaged over the data-parallel ranks,
    their norm clipped at ``max_grad_norm`` (``None``: not clipped); returns the norm before clipping."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    average_gradients(parameters)  # data parallel: the same step on every rank
    grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm or math.inf)
    optimizer.step()
    return grad_norm


def make_env(
    cfg: GLAMConfig,
    num_envs: int | None = None,
    goals: str | None = None,
    seed: int | None = None,
    goal_sampling: str | None = None,
    **kwargs,
) -> EnvBase:
    """The training environment of ``cfg.env.name`` (tensors only: prompts are rendered for the LLM
    from the state); the environment's options other than its state's (``state=False``) are
    ``env.options``' values.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import make_env
        >>> cfg = make_config("smoke")  # Playground-Text's simplified goals, 8 environments
        >>> env = make_env(cfg)
        >>> type(env).__name__, env.batch_size
        ('PlaygroundTextEnv', torch.Size([8]))
        >>> "prompt" in env.reset().keys()  # tensors only: the policy renders the text
        False
        >>> make_env(cfg, num_envs=2, goals="held_out").batch_size
        torch.Size([2])
    """
    environment = cfg.environment
    given = cfg.env.options
    options = {
        option.name: given.get(option.name, option.default) for option in environment.options if not option.state
    }
    return environment.make_env(
        num_envs or cfg.env.num_envs,
        seed=cfg.run.seed if seed is None else seed,
        goals=goals or cfg.env.goals,
        max_steps=cfg.env.max_steps,
        goal_sampling=goal_sampling or cfg.env.goal_sampling,
        **options,
        **kwargs,
    )


def check_env(cfg: GLAMConfig) -> None:
    """Refuses an environment that contradicts itself, before a run touches its run dir: TorchRL's
    ``check_env_specs`` (a 3-step random rollout under a fixed seed, the torch RNG put back) on a
    one-environment instance of ``cfg``'s, then the sizes the protocol declares against what it built:
    its batch size, the keys the library reads (the compact state, ``"action_mask"``, the reports)
    and ``num_actions(env)`` against the action spec and the mask's width. Otherwise such an
    environment fails deep in TorchRL, or at the first update, after config.json and the logs are
    written.

    Args:
        cfg (GLAMConfig): the run's config; its environment is built with ``num_envs=1`` and ``cfg.run.seed``
            (the same on every rank, so that every rank refuses alike).

    Raises:
        EnvironmentLoadError: naming the environment, where it comes from, what differs and that it
            is a bug in the environment.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import check_env
        >>> check_env(make_config("smoke"))  # Playground-Text: consistent, so nothing is raised
    """
    from torchrl.envs.utils import check_env_specs  # the env is built first: TorchRL is loaded by then

    from torchrl_glam.training.cli import user_errors

    name, environment = cfg.env.name, cfg.environment
    try:
        env = make_env(cfg, num_envs=1, seed=cfg.run.seed)
    except Exception as error:
        if isinstance(error, user_errors()):  # a refusal in its own words (missing files, a bad option)
            raise
        raise environment_error(name, "failed to build its TorchRL environment (make_env raised)", error) from error
    try:
        try:
            check_env_specs(env, seed=cfg.run.seed)
        except Exception as error:  # AssertionError, or whatever the rollout raised first
            # its first line: the rest of TorchRL's messages prints whole tensordicts
            said = " ".join(str(error).strip().split("\n", 1)[0].split())
            raise environment_error(
                name,
                "builds an environment whose data do not match its specs (TorchRL's check_env_specs on "
                f"make_env(1): {type(error).__name__}: {said})",
                bug=True,
            ) from error
        wrong = _size_mismatches(environment, env)
    finally:
        env.close()  # the check's own instance: what it holds (processes, files) is let go now
    if wrong:
        raise environment_error(name, "builds an environment unlike what it declares: " + "; ".join(wrong), bug=True)


def _size_mismatches(environment, env: EnvBase) -> list[str]:
    """What ``env`` (built by ``environment.make_env(1, ...)``) lacks or differs in from what
    ``environment`` declares and the library reads."""
    wrong = []
    if tuple(env.batch_size) != (1,):
        wrong.append(f"make_env(num_envs=1) built batch size {tuple(env.batch_size)}, not (1,)")
    keys = set(env.observation_spec.keys())
    needed = (*environment.state_keys, ACTION_MASK_KEY, ACHIEVED_GOAL_IDS_KEY, ACHIEVED_GOAL_COUNT_KEY)
    absent = [key for key in needed if key not in keys]
    if absent:
        wrong.append(f"its observation spec lacks {', '.join(map(repr, absent))} (state keys and reports it must give)")
    try:
        declared = int(environment.num_actions(env))
    except Exception as error:  # a num_actions that cannot read its own env: said here, not at the first update
        return [*wrong, f"num_actions(env) raised {type(error).__name__}: {error}"]
    widths = {}
    if ACTION_MASK_KEY in keys:
        widths[f"the {ACTION_MASK_KEY}"] = env.observation_spec[ACTION_MASK_KEY].shape[-1]
    space = getattr(env.full_action_spec["action"], "space", None)
    if getattr(space, "n", None) is not None:
        widths["the action spec"] = int(space.n)
    differ = [f"{what} has {width}" for what, width in widths.items() if width != declared]
    if differ:
        wrong.append(f"num_actions(env) is {declared}, but {' and '.join(differ)}")
    return wrong


def make_eval_envs(cfg: GLAMConfig) -> dict[str, EnvBase]:
    """The evaluation environments of the config's ``eval_sets`` (see
    :data:`~torchrl_glam.training.eval_sets.EVAL_SETS`), each with ``eval_episodes``
    sub-environments and a fixed seed, so that every algorithm of a comparison is evaluated on the
    same episodes.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import make_eval_envs
        >>> envs = make_eval_envs(make_config("smoke", {"eval_episodes": 4}))
        >>> {name: tuple(env.batch_size) for name, env in envs.items()}
        {'train': (4,), 'held_out': (4,)}
    """
    sets = {name: EVAL_SETS[name] for name in cfg.run.eval_sets}
    held_out = cfg.environment.held_out_goal_set  # the "held_out" set names the environment's own
    return {
        name: make_env(
            cfg,
            num_envs=cfg.run.eval_episodes,
            goals=held_out if spec.goals == "held_out" else spec.goals,
            seed=spec.seed_offset + cfg.run.seed,
            goal_sampling=spec.goal_sampling,
        )
        for name, spec in sets.items()
    }


def make_scorer_from_config(cfg: GLAMConfig) -> LLMScorer:
    """The config's LLM scorer (:func:`make_glam_agent` holds it in its ``TensorDictModule``)."""
    return make_glam_agent(cfg).llm


def make_glam_agent(cfg: GLAMConfig) -> GLAMAgent:
    """The agent of ``cfg``: the LLM scorer (``make_scorer``'s ``TensorDictModule``) and the actor,
    acting in ``cfg.env.name``; the losses take it."""
    llm = LLMConfig(
        name_or_path=model_of(cfg),
        dtype=cfg.model.dtype,
        device=cfg.model.device,
        lora_rank=cfg.model.lora_rank,
        lora_alpha=cfg.model.lora_alpha,
        quantization=cfg.model.quantization,
    )
    scorer = make_scorer(
        llm,
        normalization=cfg.model.normalization,
        tokenization=cfg.model.tokenization,
        autocast=cfg.model.autocast,
    )
    return GLAMAgent(scorer, environment=cfg.environment)


def model_of(cfg: GLAMConfig) -> str:
    """What ``load_llm`` loads for the config: its model for its environment
    (:attr:`GLAMConfig.resolved_model`), found and never built. An offline model not built on this
    machine raises :class:`~torchrl_glam.offline.models.OfflineModelNotBuilt` naming the command that
    builds it; :func:`build_model` builds it (a training run does, before it starts)."""
    return cfg.resolved_model.path()


def build_model(cfg: GLAMConfig) -> str:
    """Builds the config's offline model where it is neither shipped nor built on this machine yet
    (with progress; once, then cached) and returns what ``load_llm`` loads: the explicit step before
    :func:`make_glam_agent` for a config whose model may need building (another environment's
    random-init tiny model, the tiny Llama models). Any other model is returned as named.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import build_model
        >>> build_model(make_config("smoke")).endswith("tiny-t5")  # shipped: nothing to build
        True
    """
    return cfg.resolved_model.build()


def agent_policy(agent, return_log_prob: bool = False) -> TensorDictSequential:
    """The policy module of an agent: a :class:`~torchrl_glam.modules.GLAMAgent`, or an objective
    (SAC-GLAM, PPO-GLAM) acting through its ``glam_agent`` (:meth:`GLAMAgent.policy`).

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.build import make_loss
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import agent_policy, make_env
        >>> cfg = make_config("smoke")
        >>> policy = agent_policy(make_loss(cfg, num_actions=5))  # the loss's agent acts
        >>> type(policy).__name__, policy.out_keys
        ('TensorDictSequential', ['action'])
        >>> make_env(cfg).rollout(3, policy).shape  # 8 environments, 3 steps
        torch.Size([8, 3])
    """
    return GLAMAgent.of(agent).policy(return_log_prob)


def act(agent, td: TensorDictBase, greedy: bool = False, with_log_prob: bool = False) -> TensorDictBase:
    """Writes "action" into an environment tensordict with the agent's policy
    (:meth:`GLAMAgent.act <torchrl_glam.modules.GLAMAgent.act>`; ``agent`` as in :func:`agent_policy`):
    a sample, or the mode with ``greedy``; with ``with_log_prob`` also "sample_log_prob" and
    "behaviour_scores".

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.build import make_loss
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.factories import act, make_env
        >>> cfg = make_config("smoke")
        >>> loss, env = make_loss(cfg, num_actions=5), make_env(cfg)
        >>> td = act(loss, env.reset(), greedy=True)  # the mode of the policy
        >>> td["action"].shape, td["action"].dtype
        (torch.Size([8]), torch.int64)
        >>> td = act(loss, env.reset(), with_log_prob=True)  # a sample, with what PPO needs
        >>> td["sample_log_prob"].shape, td["behaviour_scores"].shape
        (torch.Size([8]), torch.Size([8, 5]))
    """
    return GLAMAgent.of(agent).act(td, greedy=greedy, with_log_prob=with_log_prob)
