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
    title: str  # what a figure's panel calls its goals (:meth:`describe` adds how they are drawn and played)
    greedy: bool = True  # the policy's mode, or a sample of it

    def describe(self, goal_type_sampling: bool = True) -> str:
        """What the set measures, in words. ``goal_type_sampling``: the environment's
        (:attr:`~torchrl_glam.envs.protocol.TextEnvironment.goal_type_sampling`); where it draws
        "by_type" as "uniform" (a game's own quest, a level's mission) goal types are not named."""
        words = [self.title]
        if self.goal_sampling == "by_type" and goal_type_sampling:
            words.append("types uniform")
        if not self.greedy:
            words.append("sampled policy")
        return ", ".join(words)


#: The evaluation sets a run can log, by name. "train" weighs the goal types equally (on the full
#: task set a per-type average, as 97.85% of its goals are sequential); "train_distribution" samples
#: goals as training does (the paper's measure); "train_sampled" runs "train"'s episodes with the
#: sampled policy, which greedy evaluation may hide.
EVAL_SETS: dict[str, EvalSet] = {
    "train": EvalSet(None, "by_type", 10_000, "training goals"),
    "train_distribution": EvalSet(None, "uniform", 30_000, "training goals as sampled in training"),
    "held_out": EvalSet("held_out", "uniform", 20_000, "held-out goals (never trained on)"),
    "train_sampled": EvalSet(None, "by_type", 10_000, "training goals", greedy=False),
    "held_out_sampled": EvalSet("held_out", "uniform", 20_000, "held-out goals (never trained on)", greedy=False),
}


def eval_set_title(name: str, environment: str | None = None) -> str:
    """The words of :meth:`EvalSet.describe` for a set of :data:`EVAL_SETS` (else its name) in a run
    on ``environment`` (a registered name): goal types are named only where it draws by type
    (:attr:`~torchrl_glam.envs.protocol.TextEnvironment.goal_type_sampling`; ``None``, or one not
    installed here, counts as drawing by type)."""
    if name not in EVAL_SETS:
        return name
    by_type = True
    if environment is not None:
        from torchrl_glam.envs import get_environment

        try:
            by_type = get_environment(environment).goal_type_sampling
        except (ValueError, ImportError):  # an environment of a package not installed here
            pass
    return EVAL_SETS[name].describe(by_type)
