"""Typed hyper-parameters of SAC-GLAM, named as in the paper, and its presets.

``SACGLAMConfig`` holds every value in sections: the shared ``env`` (with its ``options``),
``model`` and ``run`` (:mod:`torchrl_glam.training.config`), SAC-GLAM's ``algorithm`` and
``replay``. Presets are YAML files in ``presets/`` beside this module, each opening with its
purpose and the experiments/ README that measured it; ``python examples/sac_glam.py --help`` lists
them. The default, ``cpu``, runs anywhere; ``sac_glam`` and ``sac_glam_her`` are the paper's
Tables 2 and 3 on a GPU.

``make_config("cpu", {"her": False})`` builds a validated config; ``parse_overrides(["batch_size=64",
"replay.her=false"])`` types command-line ``key=value`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torchrl_glam.training.config import GLAMConfig, Presets, RunConfig, config_from_preset
from torchrl_glam.training.config import parse_overrides as parse_config_overrides


@dataclass
class SACAlgorithmConfig:
    """SAC-GLAM's critic, losses, optimisers and update schedule (Table 2, App. B-D, F), and the
    autotelic agent's goal choice."""

    critic_input: str = "observation_action"  # App. B: or "observation"
    critic_backprop: bool = True  # App. B: the critic loss trains the shared LLM weights
    critic_width: int = 1024  # App. C: two hidden layers of 1024
    # True: each head is a dueling network, Q = V(prompt) + A(candidate) - mean A over the legal
    # candidates (modules/critic.py; not in the paper)
    critic_dueling: bool = False
    # each head's distance to the TD target: "smooth_l1" (Huber, TorchRL's default; bounds the
    # gradient of the large errors of fresh targets) or "l2" (the squared error of SAC's papers)
    critic_loss: str = "smooth_l1"
    gamma: float = 0.99  # the discount
    actor_lr: float = 1e-4  # Adam on the LLM (the actor's loss; with one Adam, the critic's too)
    critic_lr: float = 1e-4  # Adam on the critic heads
    # None: the LLM takes one Adam step on the sum of the actor's and the critic's gradients, at
    # actor_lr (the paper). A value: the critic's gradient into the LLM gets its own Adam at this
    # rate, the actor's keeps actor_lr, so the critic can shape the features with larger steps than
    # the policy tolerates (not in the paper; a second backward pass through the LLM).
    critic_llm_lr: float | None = None
    # From this many environment steps on, the LLM's rates (actor_lr, critic_llm_lr) are multiplied
    # by actor_lr_decay. None: constant rates (the paper).
    actor_lr_decay_at: int | None = None
    actor_lr_decay: float = 0.3  # the factor of actor_lr_decay_at
    # > 0: an immediate-success head beside the Q-heads, its class-balanced cross-entropy added to
    # the critic's loss with this weight (objectives/sac_glam.py; not in the paper). 0: no head.
    success_loss_coef: float = 0.0
    alpha_init: float = 0.005  # the entropy temperature's initial value
    target_entropy: float = 0.0  # the policy entropy (nats) alpha is tuned to keep
    alpha_lr: float = 2e-3  # Adam on log alpha
    tau: float = 0.005  # soft update of the target heads (not given in the paper: TorchRL's default)
    # the target heads read the next observation through a tau-averaged copy of the LLM's trainable
    # weights (objectives/sac_glam.py; not in the paper, where they read the LLM itself)
    target_llm: bool = False
    n_step: int = 3  # n-step returns (data/nstep.py)
    # False: a time limit ends the n-step return like a terminal (data/nstep.py); True: bootstrap
    # there (the prompts do not show the time left, so this is the exact target)
    bootstrap_time_limit: bool = True
    update_frequency: int = 32  # environment transitions between two updates
    num_updates: int = 2  # gradient steps per update ("2 epochs", App. D)
    batch_size: int = 256  # transitions per gradient step
    # §2.2: the first updates train the critic only. The paper gives no value. 100 updates (3,200
    # environment steps at the paper's schedule) let the randomly initialised heads fit the reward
    # structure before their gradient reaches the pretrained policy, while costing ~1% of a run.
    warmup_updates: int = 100
    learning_starts: int = 256  # transitions in replay before the first update
    max_grad_norm: float | None = None  # gradient-norm clipping of the LLM and heads; None: none
    # the autotelic agent (data/autotelic.py):
    # "off" (the environment samples the task set's goals),
    # or the agent discovers goals from the social partner's reports and picks each episode's
    # goal among them, "uniform"ly or by learning progress ("lp")
    autotelic: str = "off"
    lp_epsilon: float = 0.2  # share of uniform choices of the LP curriculum
    lp_window: int = 50  # attempts per half of the LP window (per group)
    lp_groups: str = "type,category"  # "goal", or names among type, category, colour


@dataclass
class ReplayConfig:
    """The replay buffer and what goes into it: hindsight relabeling and its variants, batch
    composition, prioritized replay (App. E)."""

    buffer_capacity: int = 100_000  # transitions kept in replay
    her: bool = False  # hindsight relabeling with the goals the social partner reported (data/her.py)
    her_ratio: float = 0.5  # the share of relabeled transitions in a batch (batch_strategy "ratio")
    her_max_per_episode: int | None = None  # None: every reported goal (the paper)
    # also relabel each episode with this many goals it did not achieve (reward 0): failures for
    # the goals the environment seldom commands (data/her.py, relabel_negatives). 0: the paper.
    her_negatives: int = 0
    # their goals: "reported" (any goal reported so far) or "scene" (goals naming only the episode's
    # objects, goal types equally often: failures that tell one scene's actions apart)
    her_negatives_from: str = "reported"
    # True: beside every relabeled success, the same steps under another goal of its type naming the
    # episode's objects, a failure (data/her.py, relabel_twins): as many failed grasps under grasp
    # goals as successful ones, which HER alone never gives. Not in the paper. False: the paper.
    her_twins: bool = False
    # True: beside every success (the episode's own or a relabeled one) ending before the time limit,
    # the same state with a step that changes nothing first, then the winner (data/noop_twins.py):
    # the no-op's target is gamma exactly against the winner's 1, a contrast the critic's
    # bootstrapped targets never anchor (one step from the goal it values them within 0.01). Not in
    # the paper. False: the paper.
    noop_twins: bool = False
    # "ratio" (the paper: her_ratio of a batch relabeled), "prior" (App. E: goal types in the task
    # set's proportions), "types_uniform" (the four goal types equally often; not in the paper: on
    # the full task set, whose goals are 98% sequential, it puts a quarter of each batch on grasp
    # goals, where the critic must tell the goal's object from the others) or "uniform"
    batch_strategy: str = "ratio"
    prioritized: bool = True  # prioritized replay by TD error (TorchRL's PrioritizedSampler)
    per_alpha: float = 0.6  # prioritized replay's priority exponent
    per_beta: float = 0.4  # prioritized replay's importance-sampling exponent
    # None: per_beta all run long. A number: beta goes linearly from per_beta at step 0 to this at
    # total_steps (Schaul et al. 2016 anneal it to 1, fully correcting the bias at the end)
    per_beta_end: float | None = None
    per_eps: float = 1e-6  # added to |TD error| before the exponent: no priority is 0
    # importance weights normalised by each buffer's own smallest priority ("buffer", TorchRL's: the
    # relabeled part then carries 0.37-0.46 of the weighted loss), or each buffer's part of a batch
    # scaled to mean 1 ("part": the relabeled part carries exactly her_ratio)
    per_weight_norm: str = "buffer"


@dataclass
class SACGLAMConfig(GLAMConfig):
    """SAC-GLAM's config: the shared sections (``env``, ``model``, ``run``), ``algorithm`` and
    ``replay``.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
        >>> cfg = SACGLAMConfig()  # the defaults; make_config gives a preset's
        >>> list(cfg.to_dict())
        ['env', 'model', 'run', 'algorithm', 'replay']
        >>> cfg.env.name, cfg.get("algorithm.gamma") == cfg.get("gamma")  # a field by its path or its name
        ('playground', True)
        >>> SACGLAMConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    ALGORITHM: ClassVar[str] = "sac_glam"
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = (
        "algorithm.actor_lr",
        "algorithm.critic_lr",
        "algorithm.alpha_lr",
        "algorithm.critic_llm_lr",
    )
    LEARNING_RATE_SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = (
        "algorithm.actor_lr_decay_at",
        "algorithm.actor_lr_decay",
    )
    PER_RANK_FIELDS: ClassVar[tuple[str, ...]] = ("env.num_envs", "algorithm.batch_size")
    DISCOUNT_FIELD: ClassVar[str] = "algorithm.gamma"
    DIVERGENCE_VALUE_METRICS: ClassVar[dict[str, str]] = {"q_value": "the critic's Q-value"}

    algorithm: SACAlgorithmConfig = field(default_factory=SACAlgorithmConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    run: RunConfig = field(default_factory=lambda: RunConfig(run_dir="runs/sac_glam"))

    def _checks(self) -> dict[str, bool]:
        a, r = self.algorithm, self.replay
        return {
            **super()._checks(),
            "algorithm.critic_input": a.critic_input in ("observation_action", "observation"),
            "algorithm.critic_dueling": not a.critic_dueling or a.critic_input == "observation_action",
            "algorithm.critic_loss": a.critic_loss in ("smooth_l1", "l2"),
            "replay.batch_strategy": r.batch_strategy in ("ratio", "prior", "types_uniform", "uniform"),
            "algorithm.gamma": 0.0 <= a.gamma <= 1.0,
            "replay.her_ratio": 0.0 <= r.her_ratio <= 1.0,
            "algorithm.n_step": a.n_step >= 1,
            "algorithm.update_frequency": a.update_frequency >= 1,
            "algorithm.num_updates": a.num_updates >= 1,
            "algorithm.batch_size": a.batch_size >= 1,
            "replay.buffer_capacity": r.buffer_capacity >= a.batch_size,
            "algorithm.alpha_init": a.alpha_init > 0,
            "algorithm.actor_lr": a.actor_lr > 0,
            "algorithm.critic_lr": a.critic_lr > 0,
            "algorithm.critic_llm_lr": a.critic_llm_lr is None or (a.critic_llm_lr > 0 and a.critic_backprop),
            "algorithm.actor_lr_decay_at": a.actor_lr_decay_at is None or a.actor_lr_decay_at >= 0,
            "algorithm.actor_lr_decay": 0.0 < a.actor_lr_decay <= 1.0,
            "algorithm.alpha_lr": a.alpha_lr >= 0,
            "algorithm.success_loss_coef": a.success_loss_coef >= 0,
            "algorithm.tau": 0.0 < a.tau <= 1.0,
            "algorithm.warmup_updates": a.warmup_updates >= 0,
            "algorithm.learning_starts": a.learning_starts >= 0,
            "algorithm.critic_width": a.critic_width >= 1,
            "algorithm.max_grad_norm": a.max_grad_norm is None or a.max_grad_norm > 0,
            "replay.her_max_per_episode": r.her_max_per_episode is None or r.her_max_per_episode >= 1,
            "replay.her_negatives": r.her_negatives >= 0 and (r.her or r.her_negatives == 0),
            "replay.her_negatives_from": r.her_negatives_from in ("reported", "scene")
            and (r.her_negatives_from != "scene" or not r.her or self._has("goals_in_scene")),
            "replay.her_twins": (r.her or not r.her_twins) and (not r.her_twins or self._has("goals_in_scene")),
            "replay.noop_twins": not r.noop_twins or self._has("noop_actions"),
            "replay.per_alpha": r.per_alpha >= 0,
            "replay.per_beta": r.per_beta >= 0,
            "replay.per_beta_end": r.per_beta_end is None or r.per_beta_end >= 0,
            "replay.per_eps": r.per_eps > 0,
            "replay.per_weight_norm": r.per_weight_norm in ("buffer", "part"),
            "algorithm.autotelic": a.autotelic in ("off", "uniform", "lp")
            and (a.autotelic == "off" or self._has("neutral_scene_objects")),
            "algorithm.lp_epsilon": 0.0 <= a.lp_epsilon <= 1.0,
            "algorithm.lp_window": a.lp_window >= 1,
            "algorithm.lp_groups": _valid_groups(a.lp_groups)
            and (a.autotelic == "off" or self._has("goal_attributes") or a.lp_groups.strip() in ("type", "goal")),
        }

    def _expected(self) -> dict[str, str]:
        a = self.algorithm
        return {
            **super()._expected(),
            "algorithm.critic_input": "'observation_action' or 'observation'",
            "algorithm.critic_dueling": "false with critic_input='observation' (a dueling head splits the "
            "observation-action head: V from the prompt, A from each candidate)",
            "algorithm.critic_loss": "'smooth_l1' (Huber) or 'l2' (squared error)",
            "replay.batch_strategy": "'ratio', 'prior', 'types_uniform' or 'uniform'",
            "replay.buffer_capacity": f"at least batch_size ({a.batch_size})",
            "algorithm.max_grad_norm": "a positive number, or none for no clipping",
            "algorithm.actor_lr_decay_at": "a number of environment steps >= 0, or none for constant rates",
            **dict.fromkeys(
                [
                    "algorithm.n_step",
                    "algorithm.update_frequency",
                    "algorithm.num_updates",
                    "algorithm.batch_size",
                    "algorithm.critic_width",
                    "algorithm.lp_window",
                ],
                "an integer >= 1",
            ),
            **dict.fromkeys(["algorithm.warmup_updates", "algorithm.learning_starts"], "an integer >= 0"),
            **dict.fromkeys(["algorithm.gamma", "replay.her_ratio"], "a number in [0, 1]"),
            **dict.fromkeys(["algorithm.alpha_init", "algorithm.actor_lr", "algorithm.critic_lr"], "a positive number"),
            **dict.fromkeys(["algorithm.alpha_lr", "replay.per_alpha", "replay.per_beta"], "a number >= 0"),
            "algorithm.tau": "a number in (0, 1]",
            "replay.her_max_per_episode": "an integer >= 1, or none for every reported goal",
            "replay.per_beta_end": "a number >= 0 (1: Schaul et al.'s annealing), or none for a constant per_beta",
            "replay.per_eps": "a positive number",
            "replay.per_weight_norm": "'buffer' or 'part'",
            "algorithm.actor_lr_decay": "a factor in (0, 1]",
            "algorithm.critic_llm_lr": "none (the LLM's one Adam at actor_lr takes both losses, the paper) or a "
            "positive number with critic_backprop=true (without it no critic "
            "gradient reaches the LLM)",
            "replay.her_negatives": "an integer >= 0, and her=true when it is not 0 (negatives are relabeled "
            "copies; 0: none, the paper)",
            "replay.her_negatives_from": "'reported' or 'scene'" + self._lacks("goals_in_scene"),
            "replay.her_twins": "false, or true with her=true (twins sit beside relabeled successes)"
            + self._lacks("goals_in_scene"),
            "replay.noop_twins": "false" + self._lacks("noop_actions"),
            "algorithm.success_loss_coef": "a number >= 0 (0: no immediate-success head, the paper)",
            "algorithm.autotelic": "'off', 'uniform' or 'lp'" + self._lacks("neutral_scene_objects"),
            "algorithm.lp_epsilon": "a probability in [0, 1]",
            "algorithm.lp_groups": "'goal', or comma-separated names among type, category, colour"
            + self._lacks("goal_attributes"),
        }


def _valid_groups(groups: str) -> bool:
    from torchrl_glam.data.goal_groups import parse_groups

    try:
        parse_groups(groups)
    except ValueError:
        return False
    return True


#: The presets: ``presets/<name>.yaml`` (name -> values by section; see :class:`Presets`).
PRESETS = Presets(Path(__file__).with_name("presets"))


def make_config(preset: str = "cpu", overrides: dict[str, Any] | None = None) -> SACGLAMConfig:
    """The SAC-GLAM config of a preset with overrides applied, validated.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> cfg = make_config("smoke", {"replay.her": False, "batch_size": 64})  # by path or by name
        >>> cfg.replay.her, cfg.algorithm.batch_size, cfg.run.total_steps
        (False, 64, 400)
        >>> cfg.env.name, cfg.env.goals, cfg.model.name  # None: the offline tiny T5
        ('playground', 'simplified', None)
    """
    return config_from_preset(SACGLAMConfig, PRESETS, preset, overrides)


def parse_overrides(pairs: list[str], config_class: type[GLAMConfig] = SACGLAMConfig) -> dict[str, Any]:
    """``["batch_size=64", "her=false"]`` -> typed values, by ``SACGLAMConfig``'s fields (or
    ``config_class``'s)."""
    return parse_config_overrides(pairs, config_class)
