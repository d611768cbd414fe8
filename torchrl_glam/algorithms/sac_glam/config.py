"""Typed hyper-parameters of SAC-GLAM, named as in the paper, and its presets.

``SACGLAMConfig`` holds every value in sections: the shared ``env`` (with its ``options``),
``model`` and ``run`` (:mod:`torchrl_glam.training.config`), SAC-GLAM's ``algorithm``,
``hindsight`` (HER, as in PPO-GLAM's config) and ``replay``. Presets are YAML files in
``presets/`` beside this module, each opening with its purpose and the experiments/ README that
measured it; ``python examples/sac_glam.py --help`` lists them. The default, ``cpu``, runs
anywhere; ``sac_glam`` and ``sac_glam_her`` are the paper's Tables 2 and 3 on a GPU.

``make_config("cpu", {"her": False})`` builds a validated config; ``parse_overrides(["batch_size=64",
"hindsight.her=false"])`` types command-line ``key=value`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torchrl_glam.training.config import GLAMConfig, Presets, Rule, RunConfig, config_from_preset, lacks, setting
from torchrl_glam.training.config import parse_overrides as parse_config_overrides
from torchrl_glam.training.config.rules import minimum

#: ``hindsight.her_goals``'s choices: which of the goals the partner reported HER relabels with
HER_GOALS = ("reported", "training", "training_types")


@dataclass
class SACAlgorithmConfig:
    """SAC-GLAM's critic, losses, optimisers and update schedule (Table 2, App. B-D, F), and the
    autotelic agent's goal choice."""

    critic_input: str = setting("observation_action", 'App. B: or "observation"')
    critic_backprop: bool = setting(True, "App. B: the critic loss trains the shared LLM weights")
    critic_width: int = setting(1024, "the critic heads' hidden width, two hidden layers (App. C: 1024)")
    critic_dueling: bool = setting(
        False,
        "True: each head is a dueling network, Q = V(prompt) + A(candidate) - mean A over the legal "
        "candidates (modules/critic.py; not in the paper)",
    )
    critic_loss: str = setting(
        "smooth_l1",
        "each head's distance to the TD target: \"smooth_l1\" (Huber, TorchRL's default; bounds the gradient of "
        'the large errors of fresh targets) or "l2" (the squared error of SAC\'s papers)',
    )
    gamma: float = setting(0.99, "the discount")
    actor_lr: float = setting(1e-4, "Adam on the LLM (the actor's loss; with one Adam, the critic's too)")
    critic_lr: float = setting(1e-4, "Adam on the critic heads")
    critic_llm_lr: float | None = setting(
        None,
        "None: the LLM takes one Adam step on the sum of the actor's and the critic's gradients, at actor_lr "
        "(the paper). A value: the critic's gradient into the LLM gets its own Adam at this rate, the actor's "
        "keeps actor_lr, so the critic can shape the features with larger steps than the policy tolerates "
        "(not in the paper; a second backward pass through the LLM).",
    )
    actor_lr_decay_at: int | None = setting(
        None,
        "From this many environment steps on, the LLM's rates (actor_lr, critic_llm_lr) are multiplied by "
        "actor_lr_decay. None: constant rates (the paper).",
    )
    actor_lr_decay: float = setting(0.3, "the factor of actor_lr_decay_at")
    success_loss_coef: float = setting(
        0.0,
        "> 0: an immediate-success head beside the Q-heads, its class-balanced cross-entropy added to the "
        "critic's loss with this weight (objectives/sac_glam.py; not in the paper). 0: no head.",
    )
    alpha_init: float = setting(0.005, "the entropy temperature's initial value")
    target_entropy: float = setting(0.0, "the policy entropy (nats) alpha is tuned to keep")
    alpha_lr: float = setting(2e-3, "Adam on log alpha")
    tau: float = setting(0.005, "soft update of the target heads (not given in the paper: TorchRL's default)")
    target_llm: bool = setting(
        False,
        "the target heads read the next observation through a tau-averaged copy of the LLM's trainable "
        "weights (objectives/sac_glam.py; not in the paper, where they read the LLM itself)",
    )
    n_step: int = setting(3, "n-step returns (data/nstep.py)")
    bootstrap_time_limit: bool = setting(
        True,
        "False: a time limit ends the n-step return like a terminal (data/nstep.py); True: bootstrap there "
        "(the prompts do not show the time left, so this is the exact target)",
    )
    update_frequency: int = setting(32, "environment transitions between two updates")
    num_updates: int = setting(2, 'gradient steps per update ("2 epochs", App. D)')
    batch_size: int = setting(256, "transitions per gradient step")
    warmup_updates: int = setting(
        100,
        "§2.2: this many first updates train the critic only (the paper gives no value), so the randomly "
        "initialised heads fit the reward structure before their gradient reaches the pretrained policy; "
        "the default, 100, is 3,200 environment steps at the paper's schedule, ~1% of a run",
    )
    learning_starts: int = setting(256, "transitions in replay before the first update")
    max_grad_norm: float | None = setting(None, "gradient-norm clipping of the LLM and heads; None: none")
    autotelic: str = setting(
        "off",
        'the autotelic agent (data/autotelic.py): "off" (the environment samples the task set\'s goals), or '
        "the agent discovers goals from the social partner's reports and picks each episode's goal among "
        'them, "uniform"ly or by learning progress ("lp")',
    )
    lp_epsilon: float = setting(0.2, "share of uniform choices of the LP curriculum")
    lp_window: int = setting(50, "attempts per half of the LP window (per group)")
    lp_groups: str = setting("type,category", '"goal", or names among type, category, colour')


@dataclass
class SACHindsightConfig:
    """Hindsight relabeling (the paper's HER) and this project's variants of it: what relabeled
    transitions the finished episodes add to replay."""

    her: bool = setting(False, "hindsight relabeling with the goals the social partner reported (data/her.py)")
    her_ratio: float = setting(0.5, 'the share of relabeled transitions in a batch (batch_strategy "ratio")')
    her_max_per_episode: int | None = setting(None, "None: every reported goal (the paper)")
    her_goals: str = setting(
        "reported",
        '"reported": relabel with every goal the social partner reported (the paper); "training": only with '
        "goals of the training goal set (env.goals), the tasks the environment sets, where its partner also "
        'reports facts that no task asks for (TextWorld\'s rooms); "training_types": only with goals of the '
        "training goal set's types, tasks of the kind the environment sets (TextWorld's room takes beside "
        "treasure hunter's quests)",
    )
    her_negatives: int = setting(
        0,
        "also relabel each episode with this many goals it did not achieve (reward 0): failures for the goals "
        "the environment seldom commands (data/her.py, relabel_negatives). 0: the paper.",
    )
    her_negatives_from: str = setting(
        "reported",
        'their goals: "reported" (any goal reported so far) or "scene" (goals naming only the episode\'s '
        "objects, goal types equally often: failures that tell one scene's actions apart)",
    )
    her_twins: bool = setting(
        False,
        "True: beside every relabeled success, the same steps under another goal of its type naming the "
        "episode's objects, a failure (data/her.py, relabel_twins): as many failed grasps under grasp goals "
        "as successful ones, which HER alone never gives. Not in the paper. False: the paper.",
    )


@dataclass
class ReplayConfig:
    """The replay buffer and what goes into it besides hindsight: the no-op twins, batch
    composition, prioritized replay (App. E)."""

    buffer_capacity: int = setting(100_000, "transitions kept in replay")
    noop_twins: bool = setting(
        False,
        "True: beside every success (the episode's own or a relabeled one) ending before the time limit, the "
        "same state with a step that changes nothing first, then the winner (data/noop_twins.py): the no-op's "
        "target is gamma exactly against the winner's 1, a contrast the critic's bootstrapped targets never "
        "anchor (one step from the goal it values them within 0.01). Not in the paper. False: the paper.",
    )
    batch_strategy: str | None = setting(
        None,
        'None: "ratio" with HER, "uniform" without; "ratio" (the paper: her_ratio of a batch relabeled; '
        'with HER only), "prior" (App. E: goal types in the task set\'s '
        'proportions), "types_uniform" (the four goal types equally often; not in the paper: on the full task '
        "set, whose goals are 98% sequential, it puts a quarter of each batch on grasp goals, where the "
        'critic must tell the goal\'s object from the others) or "uniform"',
    )
    prioritized: bool = setting(True, "prioritized replay by TD error (TorchRL's PrioritizedSampler)")
    per_alpha: float = setting(0.6, "prioritized replay's priority exponent")
    per_beta: float = setting(0.4, "prioritized replay's importance-sampling exponent")
    per_beta_end: float | None = setting(
        None,
        "None: per_beta all run long. A number: beta goes linearly from per_beta at step 0 to this at "
        "total_steps (Schaul et al. 2016 anneal it to 1, fully correcting the bias at the end)",
    )
    per_eps: float = setting(1e-6, "added to |TD error| before the exponent: no priority is 0")
    per_weight_norm: str = setting(
        "buffer",
        "importance weights normalised by each buffer's own smallest priority (\"buffer\", TorchRL's: the "
        "relabeled part then carries 0.37-0.46 of the weighted loss), or each buffer's part of a batch scaled "
        'to mean 1 ("part": the relabeled part carries exactly her_ratio)',
    )


@dataclass
class SACGLAMConfig(GLAMConfig):
    """SAC-GLAM's config: the shared sections (``env``, ``model``, ``run``), ``algorithm``,
    ``hindsight`` and ``replay``.

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
        >>> cfg = SACGLAMConfig().validate()  # the defaults, checked; make_config gives a preset's
        >>> list(cfg.to_dict())
        ['env', 'model', 'run', 'algorithm', 'hindsight', 'replay']
        >>> cfg.env.name, cfg.get("algorithm.gamma") == cfg.get("gamma")  # a field by its path or its name
        ('playground', True)
        >>> SACGLAMConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    ALGORITHM: ClassVar[str] = "sac_glam"

    @classmethod
    def saved_values(cls, flat: dict[str, Any]) -> dict[str, Any]:
        """0.3.0 saved ``batch_strategy="ratio"`` for every run, HER or not (uniform batches without
        it): read as the default (``training.compatibility``: "ratio_without_her_0_3")."""
        flat = super().saved_values(flat)  # HER's fields under hindsight
        if flat.get("replay.batch_strategy") == "ratio" and flat.get("hindsight.her") is False:
            return {**flat, "replay.batch_strategy": None}
        return flat

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
    hindsight: SACHindsightConfig = field(default_factory=SACHindsightConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    run: RunConfig = field(default_factory=lambda: RunConfig(run_dir="runs/sac_glam"))

    RULES: ClassVar[tuple[Rule, ...]] = (
        *GLAMConfig.RULES,
        Rule(
            "algorithm.critic_input",
            lambda c, e: c.algorithm.critic_input in ("observation_action", "observation"),
            "'observation_action' or 'observation'",
        ),
        Rule(
            "algorithm.critic_dueling",
            lambda c, e: not c.algorithm.critic_dueling or c.algorithm.critic_input == "observation_action",
            "false with critic_input='observation' (a dueling head splits the observation-action head: V "
            "from the prompt, A from each candidate)",
        ),
        Rule(
            "algorithm.critic_loss",
            lambda c, e: c.algorithm.critic_loss in ("smooth_l1", "l2"),
            "'smooth_l1' (Huber) or 'l2' (squared error)",
        ),
        Rule(
            "replay.batch_strategy",
            lambda c, e: c.replay.batch_strategy in (None, "ratio", "prior", "types_uniform", "uniform"),
            "none, 'ratio', 'prior', 'types_uniform' or 'uniform'",
        ),
        # a share of relabeled transitions needs them: without HER, "ratio" silently drew uniform batches
        Rule(
            "replay.batch_strategy",
            lambda c, e: c.replay.batch_strategy != "ratio" or c.hindsight.her,
            "not 'ratio' without HER (her=false), whose batches hold no relabeled transitions: leave it "
            "unset (uniform batches) or choose 'uniform', 'prior' or 'types_uniform'",
        ),
        Rule("algorithm.gamma", lambda c, e: 0.0 <= c.algorithm.gamma <= 1.0, "a number in [0, 1]"),
        Rule("hindsight.her_ratio", lambda c, e: 0.0 <= c.hindsight.her_ratio <= 1.0, "a number in [0, 1]"),
        Rule(
            "hindsight.her_goals",
            lambda c, e: c.hindsight.her_goals in HER_GOALS,
            f"{', '.join(map(repr, HER_GOALS[:-1]))} or {HER_GOALS[-1]!r}",
        ),
        minimum("algorithm.n_step", 1),
        minimum("algorithm.update_frequency", 1),
        minimum("algorithm.num_updates", 1),
        minimum("algorithm.batch_size", 1),
        Rule(
            "replay.buffer_capacity",
            lambda c, e: c.replay.buffer_capacity >= c.algorithm.batch_size,
            lambda c, e: f"at least batch_size ({c.algorithm.batch_size})",
        ),
        Rule("algorithm.alpha_init", lambda c, e: c.algorithm.alpha_init > 0, "a positive number"),
        Rule("algorithm.actor_lr", lambda c, e: c.algorithm.actor_lr > 0, "a positive number"),
        Rule("algorithm.critic_lr", lambda c, e: c.algorithm.critic_lr > 0, "a positive number"),
        Rule(
            "algorithm.critic_llm_lr",
            lambda c, e: (
                c.algorithm.critic_llm_lr is None or (c.algorithm.critic_llm_lr > 0 and c.algorithm.critic_backprop)
            ),
            "none (the LLM's one Adam at actor_lr takes both losses, the paper) or a positive number with "
            "critic_backprop=true (without it no critic gradient reaches the LLM)",
        ),
        Rule(
            "algorithm.actor_lr_decay_at",
            lambda c, e: c.algorithm.actor_lr_decay_at is None or c.algorithm.actor_lr_decay_at >= 0,
            "a number of environment steps >= 0, or none for constant rates",
        ),
        Rule("algorithm.actor_lr_decay", lambda c, e: 0.0 < c.algorithm.actor_lr_decay <= 1.0, "a factor in (0, 1]"),
        Rule("algorithm.alpha_lr", lambda c, e: c.algorithm.alpha_lr >= 0, "a number >= 0"),
        Rule(
            "algorithm.success_loss_coef",
            lambda c, e: c.algorithm.success_loss_coef >= 0,
            "a number >= 0 (0: no immediate-success head, the paper)",
        ),
        Rule("algorithm.tau", lambda c, e: 0.0 < c.algorithm.tau <= 1.0, "a number in (0, 1]"),
        minimum("algorithm.warmup_updates", 0),
        minimum("algorithm.learning_starts", 0),
        minimum("algorithm.critic_width", 1),
        Rule(
            "algorithm.max_grad_norm",
            lambda c, e: c.algorithm.max_grad_norm is None or c.algorithm.max_grad_norm > 0,
            "a positive number, or none for no clipping",
        ),
        Rule(
            "hindsight.her_max_per_episode",
            lambda c, e: c.hindsight.her_max_per_episode is None or c.hindsight.her_max_per_episode >= 1,
            "an integer >= 1, or none for every reported goal",
        ),
        Rule(
            "hindsight.her_negatives",
            lambda c, e: c.hindsight.her_negatives >= 0 and (c.hindsight.her or c.hindsight.her_negatives == 0),
            "an integer >= 0, and her=true when it is not 0 (negatives are relabeled copies; 0: none, the paper)",
        ),
        Rule(
            "hindsight.her_negatives_from",
            lambda c, e: (
                c.hindsight.her_negatives_from in ("reported", "scene")
                and (c.hindsight.her_negatives_from != "scene" or not c.hindsight.her or e.has("goals_in_scene"))
            ),
            lambda c, e: "'reported' or 'scene'" + lacks(c, e, "goals_in_scene"),
        ),
        Rule(
            "hindsight.her_twins",
            lambda c, e: (
                (c.hindsight.her or not c.hindsight.her_twins)
                and (not c.hindsight.her_twins or e.has("goals_in_scene"))
            ),
            lambda c, e: (
                "false, or true with her=true (twins sit beside relabeled successes)" + lacks(c, e, "goals_in_scene")
            ),
        ),
        Rule(
            "replay.noop_twins",
            lambda c, e: not c.replay.noop_twins or e.has("noop_actions"),
            lambda c, e: "false" + lacks(c, e, "noop_actions"),
        ),
        Rule("replay.per_alpha", lambda c, e: c.replay.per_alpha >= 0, "a number >= 0"),
        Rule("replay.per_beta", lambda c, e: c.replay.per_beta >= 0, "a number >= 0"),
        Rule(
            "replay.per_beta_end",
            lambda c, e: c.replay.per_beta_end is None or c.replay.per_beta_end >= 0,
            "a number >= 0 (1: Schaul et al.'s annealing), or none for a constant per_beta",
        ),
        Rule("replay.per_eps", lambda c, e: c.replay.per_eps > 0, "a positive number"),
        Rule(
            "replay.per_weight_norm", lambda c, e: c.replay.per_weight_norm in ("buffer", "part"), "'buffer' or 'part'"
        ),
        Rule(
            "algorithm.autotelic",
            lambda c, e: (
                c.algorithm.autotelic in ("off", "uniform", "lp")
                and (c.algorithm.autotelic == "off" or e.has("neutral_scene_objects"))
            ),
            lambda c, e: "'off', 'uniform' or 'lp'" + lacks(c, e, "neutral_scene_objects"),
        ),
        Rule("algorithm.lp_epsilon", lambda c, e: 0.0 <= c.algorithm.lp_epsilon <= 1.0, "a probability in [0, 1]"),
        minimum("algorithm.lp_window", 1),
        Rule(
            "algorithm.lp_groups",
            lambda c, e: (
                _valid_groups(c.algorithm.lp_groups)
                and (
                    c.algorithm.autotelic == "off"
                    or e.has("goal_attributes")
                    or c.algorithm.lp_groups.strip() in ("type", "goal")
                )
            ),
            lambda c, e: (
                "'goal', or comma-separated names among type, category, colour" + lacks(c, e, "goal_attributes")
            ),
        ),
    )


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
        >>> cfg = make_config("smoke", {"hindsight.her": False, "batch_size": 64})  # by path or by name
        >>> cfg.hindsight.her, cfg.algorithm.batch_size, cfg.run.total_steps
        (False, 64, 400)
        >>> cfg.env.name, cfg.env.goals, cfg.model.name  # None: the offline tiny T5
        ('playground', 'simplified', None)
    """
    return config_from_preset(SACGLAMConfig, PRESETS, preset, overrides)


def parse_overrides(pairs: list[str], config_class: type[GLAMConfig] = SACGLAMConfig) -> dict[str, Any]:
    """``["batch_size=64", "her=false"]`` -> typed values, by ``SACGLAMConfig``'s fields (or
    ``config_class``'s)."""
    return parse_config_overrides(pairs, config_class)
