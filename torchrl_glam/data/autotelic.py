"""An autotelic agent's goal choice, as a TorchRL transform on the training environment.

The agent is never given the goal list: :class:`AutotelicGoals` learns goals from the social
partner's reports (:class:`~torchrl_glam.data.goal_memory.GoalMemory`) and chooses each
episode's goal among them, uniformly or by learning progress
(:mod:`~torchrl_glam.data.curriculum`). Everything downstream (acting, HER, n-step, replay, the
loss) is unchanged; only who picks the goal differs.

Why a transform: every reset of the environment must carry the agent's goals, the auto-resets of
``step_and_maybe_reset`` included, and those call ``reset`` with the ``"_reset"`` mask only. A
transform's ``_reset_env_preprocess`` sees each of those resets before the base environment does,
so it writes the environment's explicit-goal request (``"goal"``, and ``"scene"`` for the neutral
goal) there; its ``_step`` sees every step's reports and episode ends. ``TransformedEnv(env,
AutotelicGoals(...))`` is then a drop-in for ``env`` in any loop or collector.

Keys, B = ``num_envs``:

* read at each step: ``("next", "achieved_goal_ids")`` [B, K], ``("next", "achieved_goal_count")``
  [B] (discovery), ``("next", "goal_id")``, ``("next", "done")``, ``("next", "terminated")``,
  ``("next", "reward")`` [B, 1]
  (the outcome of each finished attempt, for the LP statistics);
* written at each reset, into the request passed to the base environment: ``"goal"`` (one goal
  text per reset sub-environment) and ``"scene"`` (object names for a neutral episode, else None).

Before the first report the agent knows no goal. Its episodes then pursue :data:`NEUTRAL_GOAL` in
a scene without the object it names (the other objects drawn uniformly), so no event can achieve it and no
reward ever comes from it:
the social partner's reports, through hindsight relabeling, are the only learning signal (and
they are what fills the memory). Neutral episodes are left out of the LP statistics. A neutral
goal rather than a goal sampled from the task set, which would hand the agent the goal list.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs.transforms import Transform

from torchrl_glam.data.curriculum import LearningProgress, choose_goals, goal_groups
from torchrl_glam.data.goal_memory import GoalMemory
from torchrl_glam.envs import (
    ACHIEVED_GOAL_COUNT_KEY,
    ACHIEVED_GOAL_IDS_KEY,
    TextEnvironment,
    require_environment,
    step_success,
)

#: The goal of episodes that start before any goal is known (its object is kept out of the scene).
NEUTRAL_GOAL = "Grasp red door"
STRATEGIES = ("uniform", "lp")
_STEP_KEYS = [
    ("next", ACHIEVED_GOAL_IDS_KEY),
    ("next", ACHIEVED_GOAL_COUNT_KEY),
    ("next", "goal_id"),
    ("next", "done"),
    ("next", "terminated"),
    ("next", "reward"),
]


class AutotelicGoals(Transform):
    """Goal discovery from the social partner's reports and goal choice at every reset.

    Args:
        num_envs (int): the batch size of the environment it wraps.
        num_objects (int): objects per scene: only goals that fit are chosen (the environment refuses
            a goal needing more objects than a scene holds).
        strategy (str): "lp" (learning-progress curriculum) or "uniform" over the discovered goals.
        epsilon (float): the share of uniform choices of the LP curriculum.
        window (int): attempts per half of the LP window.
        groups (str): how goals are grouped for LP: "goal", or names among "type", "category", "colour".
        seed (int | None): seed of the choices' generator.
        task_set (str | None): the goal set the environment was built for ("simplified", ...): only for the
            logs (``autotelic/discovered_task_fraction``); the agent's choices never read it.
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment`; it must choose goals
            and scenes at reset (``neutral_scene_objects``).
    """

    def __init__(
        self,
        num_envs: int,
        num_objects: int,
        strategy: str = "lp",
        epsilon: float = 0.2,
        window: int = 50,
        groups: str = "type,category",
        seed: int | None = None,
        task_set: str | None = None,
        *,
        environment: TextEnvironment,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"autotelic strategy {strategy!r}: choose one of {STRATEGIES}")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon={epsilon} must be a probability (the share of uniform choices)")
        super().__init__(in_keys=[], out_keys=[])
        self.environment = environment = require_environment(environment)
        environment.require("neutral_scene_objects", "autotelic goal choice")
        self.catalogue = catalogue = environment.catalogue
        self.goal_types = environment.goal_types
        self.num_envs, self.num_objects = num_envs, num_objects
        self.strategy, self.epsilon = strategy, epsilon
        self.memory = GoalMemory(len(catalogue))
        self.group_of, self.group_names = goal_groups(catalogue, groups, environment=environment)
        self.progress = LearningProgress(self.group_of, len(self.group_names), window)
        self.fits = torch.as_tensor(catalogue.required_objects <= num_objects)
        self.train_ids = torch.as_tensor(catalogue.goal_set("train"))
        self.task_ids = None if task_set is None else torch.as_tensor(catalogue.goal_set(task_set))
        self._neutral_objects = environment.neutral_scene_objects(NEUTRAL_GOAL)
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)
        self.env_steps = 0  # sub-environment steps seen (the memory's clock)
        self.neutral = torch.zeros(num_envs, dtype=torch.bool)  # the episode in progress is neutral
        self.choices = self._no_choices()

    def _no_choices(self) -> dict[str, torch.Tensor]:
        """Counters of the choices since the last :meth:`metrics` call."""
        return {
            "neutral": torch.zeros((), dtype=torch.int64),
            "uniform": torch.zeros((), dtype=torch.int64),
            "lp": torch.zeros((), dtype=torch.int64),
            "by_type": torch.zeros(len(self.goal_types), dtype=torch.int64),
            "by_group": torch.zeros(len(self.group_names), dtype=torch.int64),
        }

    # ------------------------------------------------------------------ the transform
    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        B = self.num_envs
        if tensordict is None:
            tensordict = TensorDict({}, batch_size=[B])
        reset = tensordict.get("_reset", None)
        reset = torch.ones(B, dtype=torch.bool) if reset is None else reset.reshape(B).cpu()
        rows = torch.nonzero(reset).squeeze(-1)
        goals, scenes = self.choose(len(rows))
        request_goals, request_scenes = [None] * B, [None] * B
        for row, goal, scene in zip(rows.tolist(), goals, scenes):
            request_goals[row], request_scenes[row] = goal, scene
            self.neutral[row] = scene is not None
        tensordict.set_non_tensor("goal", request_goals)
        tensordict.set_non_tensor("scene", request_scenes)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        B = self.num_envs
        self.memory.add(
            next_tensordict[ACHIEVED_GOAL_IDS_KEY],
            next_tensordict[ACHIEVED_GOAL_COUNT_KEY],
            self.env_steps + torch.arange(B),
        )
        self.env_steps += B
        ended = next_tensordict["done"].reshape(B) & ~self.neutral
        self.progress.record(
            next_tensordict["goal_id"].reshape(B)[ended], step_success(next_tensordict).reshape(B)[ended]
        )
        return next_tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # nothing to change in the observations

    # ------------------------------------------------------------------ goal choice
    def candidates(self) -> torch.Tensor:
        """bool [num_goals]: the goals the agent may choose (discovered, and fitting the scenes)."""
        return self.memory.known & self.fits

    def choose(self, n: int) -> tuple[list[str], list[list[str] | None]]:
        """Goals (texts) for ``n`` new episodes, and their scenes: ``None`` (the environment
        samples one that fits the goal) or, for the neutral goal, a scene without its object."""
        candidates = self.candidates()
        if not bool(candidates.any()):
            self.choices["neutral"] += n
            scenes = [
                [
                    self._neutral_objects[i]
                    for i in torch.randperm(len(self._neutral_objects), generator=self.generator)[: self.num_objects]
                ]
                for _ in range(n)
            ]
            return [NEUTRAL_GOAL] * n, scenes
        lp = self.progress.progress() if self.strategy == "lp" else None
        ids, uniform = choose_goals(candidates, n, self.generator, lp, self.group_of, self.epsilon)
        self.choices["uniform"] += int(uniform.sum())
        self.choices["lp"] += int((~uniform).sum())
        self.choices["by_type"] += torch.bincount(
            torch.as_tensor(self.catalogue.goal_type)[ids], minlength=len(self.goal_types)
        )
        self.choices["by_group"] += torch.bincount(self.group_of[ids], minlength=len(self.group_names))
        return [self.catalogue.goals[i] for i in ids.tolist()], [None] * n

    # ------------------------------------------------------------------ logs
    def metrics(self) -> dict[str, float]:
        """Scalars for the logs (choice shares since the last :meth:`reset_choice_counts`):
        ``autotelic/discovered`` (goals in memory), ``autotelic/discovered_train_fraction`` (of the
        8,470 training goals), ``autotelic/discovered_task_fraction`` (of the environment's task
        set, when given), ``autotelic/choice/<neutral|uniform|lp>`` and
        ``autotelic/chosen/<goal type>`` (shares of the episodes started), ``autotelic/lp_mean`` and
        ``autotelic/lp_max`` over the groups holding discovered goals."""
        known = self.memory.known
        out = {
            "autotelic/discovered": float(known.sum()),
            "autotelic/discovered_train_fraction": float(known[self.train_ids].float().mean()),
        }
        if self.task_ids is not None:
            out["autotelic/discovered_task_fraction"] = float(known[self.task_ids].float().mean())
        chosen = self.choices
        total = int(chosen["neutral"] + chosen["uniform"] + chosen["lp"])
        if total:
            for kind in ("neutral", "uniform", "lp"):
                out[f"autotelic/choice/{kind}"] = int(chosen[kind]) / total
            for k, name in enumerate(self.goal_types):
                out[f"autotelic/chosen/{name}"] = int(chosen["by_type"][k]) / total
        groups = torch.zeros(len(self.group_names), dtype=torch.bool)
        groups[self.group_of[known]] = True
        if groups.any():
            lp = self.progress.progress()[groups]
            out["autotelic/lp_mean"], out["autotelic/lp_max"] = float(lp.mean()), float(lp.max())
        return out

    def group_table(self) -> dict[str, dict[str, float]]:
        """Per group holding discovered goals: discovered goals, attempts, recent success, LP and
        the episodes chosen in it since the last :meth:`reset_choice_counts`."""
        known = torch.bincount(self.group_of[self.memory.known], minlength=len(self.group_names))
        lp, success = self.progress.progress(), self.progress.recent_success()
        return {
            name: {
                "discovered": int(known[g]),
                "attempts": int(self.progress.attempts[g]),
                "recent_success": None if success[g].isnan() else float(success[g]),
                "lp": float(lp[g]),
                "chosen": int(self.choices["by_group"][g]),
            }
            for g, name in enumerate(self.group_names)
            if known[g]
        }

    def reset_choice_counts(self) -> None:
        """Starts the next logging interval's choice counters."""
        self.choices = self._no_choices()

    # ------------------------------------------------------------------ checkpoints
    def get_extra_state(self) -> dict:
        """Memory, LP statistics, generator, clock and counters: ``state_dict()`` holds them all."""
        return {
            "memory": self.memory.state_dict(),
            "progress": self.progress.state_dict(),
            "generator": self.generator.get_state(),
            "env_steps": self.env_steps,
            "neutral": self.neutral.clone(),
            "choices": {k: v.clone() for k, v in self.choices.items()},
            "strategy": self.strategy,
        }

    def set_extra_state(self, state: dict) -> None:
        if state["strategy"] != self.strategy:
            raise ValueError(
                f"the checkpoint's autotelic strategy is {state['strategy']!r}, this run's "
                f"{self.strategy!r}: resume with the run's autotelic setting"
            )
        if state["neutral"].shape != self.neutral.shape:
            raise ValueError(
                f"the checkpoint has {state['neutral'].shape[0]} sub-environments, this run "
                f"{self.num_envs}: resume with the run's num_envs"
            )
        self.memory.load_state_dict(state["memory"])
        self.progress.load_state_dict(state["progress"])
        self.generator.set_state(state["generator"])
        self.env_steps = state["env_steps"]
        self.neutral = state["neutral"].clone()
        self.choices = {k: v.clone() for k, v in state["choices"].items()}
