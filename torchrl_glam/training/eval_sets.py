"""The evaluation sets a run can log (:data:`EVAL_SETS`, chosen by the config's ``eval_sets``).

Plain data, apart from :mod:`~torchrl_glam.training.evaluation` (which runs them, with torch):
the config's validation and the command line read them without importing torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvalSet:
    """Which episodes an evaluation set runs and how the agent acts in them."""

    goals: str | None  # the goal set; None: the run's own (``cfg.env.goals``)
    goal_sampling: str  # "by_type": goal types uniform; "uniform": as training samples goals
    seed_offset: int  # the episodes' seed is seed_offset + the run's seed: the same for every algorithm
    title: str  # what a figure's panel calls it
    greedy: bool = True  # the policy's mode, or a sample of it


#: The evaluation sets a run can log, by name. "train" weighs the goal types equally (on the full
#: task set a per-type average, as 97.85% of its goals are sequential); "train_distribution" samples
#: goals as training does (the paper's measure); "train_sampled" runs "train"'s episodes with the
#: sampled policy, which greedy evaluation may hide.
EVAL_SETS: dict[str, EvalSet] = {
    "train": EvalSet(None, "by_type", 10_000, "training goals, types uniform"),
    "train_distribution": EvalSet(None, "uniform", 30_000, "training goals as sampled in training"),
    "held_out": EvalSet("held_out", "uniform", 20_000, "held-out goals (never trained on)"),
    "train_sampled": EvalSet(None, "by_type", 10_000, "training goals, types uniform, sampled policy", greedy=False),
    "held_out_sampled": EvalSet(
        "held_out", "uniform", 20_000, "held-out goals (never trained on), sampled policy", greedy=False
    ),
}
