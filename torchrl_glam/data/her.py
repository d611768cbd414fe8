"""Hindsight relabeling with the social partner's reports (paper §2.2, App. E; HER "future").

At the end of an episode, for every goal g the social partner reported (other than the episode's
own goal), at the step t of its first report, the section of the trajectory up to t is added again
with g as its goal: reward 1 and terminal at t, nothing after t, marked ``relabeled``. That is
exactly the episode the agent would have lived with goal g: the environment rewards a goal on the
step that reports it, and with g the episode ends at g's first report. Later reports of g (a partner
that reports a state on every step it holds) are never relabeled: they would end sections that
cannot happen (tests/data/test_her_contract.py checks this by replaying every section).

Why not TorchRL's ``HERReplayBuffer``: it relabels single transitions at sampling time from goals
stored in the states, and keeps the done flags and n-step sums of the stored transition unchanged
(checked in torchrl 0.14.1). Here the relabeled goal comes from the social partner (not from the
state), the section ends (terminal) at the reporting step, and the n-step returns are recomputed
on the relabeled section, so relabeling has to happen on whole episodes, before n-step.

Hindsight negatives (an option, not the paper's): an episode relabeled with a goal the social
partner never reported in it is, just as exactly, the episode the agent would have lived with that
goal: reward 0 at every step, and no terminal. Relabeling gives the critic successes only; for a
goal the environment seldom commands (single grasp goals are 1.6% of the full task set's episodes)
it then sees almost no failure, and over-values it.
:func:`relabel_negatives` adds such failures, with goals the social partner has reported before
(in any episode), the "random" goals of HER (Andrychowicz et al. 2017, §4.5), or with goals that
name only the episode's own objects (:func:`scene_goals`): the failures that tell apart the actions
of one scene, each goal type drawn equally often. :func:`relabel_twins` puts one such failure
beside every hindsight success, at the same steps: as many failed grasps under grasp goals as
successful ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from torchrl_glam.data.episodes import rollout_episodes
from torchrl_glam.data.goal_memory import GoalMemory
from torchrl_glam.envs import (
    ACHIEVED_GOAL_COUNT_KEY,
    ACHIEVED_GOAL_IDS_KEY,
    GAME_OVER_KEY,
    GOAL_ID_KEY,
    TextEnvironment,
    require_environment,
)


def reported_goals(episodes: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
    """(``ids`` [E, T, K], ``reported`` [E, T, K] bool): the social partner's report slots of a padded
    episode batch, and which of them hold a report within the episode."""
    ids = episodes["next", ACHIEVED_GOAL_IDS_KEY]
    reported = torch.arange(ids.shape[-1]) < episodes["next", ACHIEVED_GOAL_COUNT_KEY].unsqueeze(-1)
    return ids, reported & episodes["mask"].unsqueeze(-1)


def first_reports(
    ids: torch.Tensor, reported: torch.Tensor, reported_before: torch.Tensor | None = None
) -> torch.Tensor:
    """bool [E, T, K]: the report slots (:func:`reported_goals`) that hold the first report of
    their goal in their episode. With that goal the episode would have ended there: a later report
    of it (an environment whose partner reports a state, such as "facing the key", on every step
    it holds) ends an episode that cannot happen. ``reported_before`` (bool [E, G]): goals already
    reported before the batch's first step (a piece of an episode begun earlier), never first here.
    """
    E, T, K = ids.shape
    safe = ids.clamp(min=0).reshape(E, T * K)
    step = torch.arange(T).view(1, T, 1).expand(E, T, K)
    width = int(safe.max()) + 1 if safe.numel() else 1
    if reported_before is not None:
        width = max(width, reported_before.shape[-1])
    # the first step reporting each goal, per episode (T: never): a scatter-min over goal ids
    first = torch.full((E, width), T, dtype=torch.long)
    first.scatter_reduce_(1, safe, torch.where(reported, step, T).reshape(E, T * K), "amin")
    if reported_before is not None:
        first[:, : reported_before.shape[-1]].masked_fill_(reported_before.to(torch.bool), -1)
    return reported & (first.gather(1, safe).view(E, T, K) == step)


def hindsight_steps(
    episodes: TensorDictBase,
    max_per_episode: int | None = None,
    generator: torch.Generator | None = None,
    keep_goal: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    reported_before: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(episode ``e``, step ``t``, goal) [M] each: the goals HER relabels a padded episode batch
    [E, T] with, and where: each goal's first report in its episode, other than the episode's own
    goal (arguments as :func:`relabel_episodes`; ``reported_before`` as :func:`first_reports`)."""
    ids, reported = reported_goals(episodes)  # [E, T, K]
    reported = first_reports(ids, reported, reported_before)
    valid = reported & (ids != episodes["goal_id"][:, :1, None])  # not the episode's own goal
    e, t, k = valid.nonzero(as_tuple=True)
    if keep_goal is not None and len(e):
        keep = keep_goal(episodes["goal_id"][e, 0], ids[e, t, k])
        e, t, k = e[keep], t[keep], k[keep]
    if max_per_episode is not None and len(e):
        # a random subset of at most max_per_episode (e, t, k) triples per episode
        keys = torch.rand(len(e), generator=generator) + e.float() * 2  # random order within episode
        order = torch.argsort(keys)
        e, t, k = e[order], t[order], k[order]
        rank = torch.arange(len(e)) - torch.searchsorted(e, e, right=False)
        keep = rank < max_per_episode
        e, t, k = e[keep], t[keep], k[keep]
    return e, t, ids[e, t, k]


def _sections(
    episodes: TensorDictBase, e: torch.Tensor, t: torch.Tensor, goals: torch.Tensor, success: bool
) -> TensorDictBase:
    """Copies of episode ``e`` up to step ``t`` with goal ``goals``, marked relabeled: a success
    (reward 1 and a terminal at ``t``) or a failure (reward 0, a truncation at ``t``: with that
    goal the episode would have gone on, so its n-step returns bootstrap there; a terminal where
    the environment says the game is over, :data:`~torchrl_glam.envs.keys.GAME_OVER_KEY`)."""
    T = episodes.shape[1]
    sections = episodes[e].clone()
    if not len(e):
        return sections
    steps = torch.arange(T).expand(len(e), T)
    end = t.unsqueeze(-1)
    at_end = steps == end
    sections["goal_id"] = goals.unsqueeze(-1).expand(len(e), T).clone()
    sections["mask"] = steps <= end
    sections["next", "reward"] = (at_end & success).to(sections["next", "reward"].dtype)
    ends = at_end & success
    if not success and GAME_OVER_KEY in sections["next"].keys():
        ends = at_end & sections["next", GAME_OVER_KEY].reshape(at_end.shape)
    sections["next", "terminated"] = ends
    sections["next", "truncated"] = at_end & ~ends
    sections["relabeled"] = torch.ones_like(at_end)
    # past the new end nothing happened: no reports either
    sections["next", ACHIEVED_GOAL_COUNT_KEY] = torch.where(steps <= end, sections["next", ACHIEVED_GOAL_COUNT_KEY], 0)
    return sections


def relabel_episodes(
    episodes: TensorDictBase,
    max_per_episode: int | None = None,
    generator: torch.Generator | None = None,
    keep_goal: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> TensorDictBase:
    """Relabeled copies of a padded episode batch [E, T] (see ``episodes.py``): one per
    (episode, goal first reported at step t), goal replaced, ending with reward 1 and a terminal at t.

    Args:
        episodes (TensorDictBase): the finished episodes.
        max_per_episode (int | None): relabel with at most this many reported goals per episode, drawn at random
            (``None``: all of them, the paper's choice).
        generator (torch.Generator | None): the random generator of that draw.
        keep_goal (Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None): ``keep_goal(goal_ids, relabel_ids)``
            -> bool, elementwise: relabel only where
            it holds (e.g. :func:`~torchrl_glam.data.subgoals.aligned_goal_filter`); ``None``: all.
    """
    e, t, goals = hindsight_steps(episodes, max_per_episode, generator, keep_goal)
    return _sections(episodes, e, t, goals, success=True)


def scene_goals(scene, goal_ids: torch.Tensor, *, environment: TextEnvironment) -> torch.Tensor:
    """bool [E, G]: which of the goals ``goal_ids`` [G] name only objects of each episode, as the
    environment's ``goals_in_scene`` says (Playground-Text: a goal names an object when the social
    partner would report it for an event on that object).

    ``scene``: the episodes' episode keys (a mapping of [E, ...] tensors), or the tensor of the
    one episode key after "goal_id" (Playground-Text's "objects" [E, N])."""
    environment = require_environment(environment)
    if isinstance(scene, torch.Tensor):
        scene = dict(zip(environment.episode_keys[1:], [scene]))
    return environment.goals_in_scene(scene, goal_ids)


def relabel_negatives(
    episodes: TensorDictBase,
    per_episode: int,
    generator: torch.Generator | None = None,
    pool: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    goal_type: torch.Tensor | None = None,
) -> TensorDictBase:
    """Copies of a padded episode batch [E, T] relabeled with goals they did not achieve: up to
    ``per_episode`` distinct goals per episode, drawn among ``pool`` (goal ids; ``None``: the goals
    reported anywhere in the batch), never one reported in that episode nor its own goal. Reward 0
    and no terminal at every step; the copy ends with a truncation at the episode's last step (the
    episode with that goal would have gone on), so its n-step returns bootstrap there. Marked
    ``relabeled``.

    ``allowed`` (bool [E, P], over the columns of a sorted, distinct ``pool`` of P goals) limits
    each episode's draw (e.g. :func:`scene_goals`). With ``goal_type`` ([P], each pool goal's type)
    every type among an episode's candidates is drawn equally often; without it, every goal is.
    """
    E = episodes.shape[0]
    ids, reported = reported_goals(episodes)
    pool = torch.unique(ids[reported] if pool is None else pool)  # sorted
    if allowed is not None and allowed.shape != (E, len(pool)):
        raise ValueError(
            f"allowed must be [episodes, pool goals] = {[E, len(pool)]}, got {list(allowed.shape)} "
            "(its columns follow the sorted, distinct pool)"
        )
    if per_episode < 1 or not len(pool):
        return episodes[:0].clone()
    excluded = ~unachieved_goals(episodes, pool, allowed)
    # distinct goals per episode: the top random keys among the allowed ones. With goal types,
    # weighted draws without replacement (key log(u) / w, Efraimidis & Spirakis 2006), each goal
    # weighted by 1 / (the episode's candidates of its type)
    keys = torch.rand(E, len(pool), generator=generator).log()
    if goal_type is not None:
        one_hot = torch.nn.functional.one_hot(goal_type.long()).bool()  # [P, types]
        per_type = ((~excluded).unsqueeze(-1) & one_hot).sum(1)  # [E, types]
        keys = keys * per_type[:, goal_type.long()].clamp(min=1)
    keys = keys.masked_fill(excluded, -torch.inf)
    top, index = keys.topk(min(per_episode, len(pool)), dim=1)
    chosen = top > -torch.inf
    e = torch.arange(E).unsqueeze(-1).expand_as(index)[chosen]
    last = episodes["mask"].sum(-1) - 1
    return _sections(episodes, e, last[e], pool[index[chosen]], success=False)


def unachieved_goals(episodes: TensorDictBase, pool: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """bool [E, P]: which goals of a sorted, distinct ``pool`` [P] each episode of a padded batch
    [E, T] never achieved (not reported in it) and was not given, among the ``allowed`` ones."""
    E = episodes.shape[0]
    ids, reported = reported_goals(episodes)
    excluded = torch.zeros(E, len(pool), dtype=torch.bool) if allowed is None else ~allowed

    def in_pool(goals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        at = torch.searchsorted(pool, goals.contiguous()).clamp(max=len(pool) - 1)
        return at, pool[at] == goals  # each goal's position in the pool, and whether it is there

    at, found = in_pool(ids[reported])
    excluded[torch.arange(E).view(E, 1, 1).expand_as(ids)[reported][found], at[found]] = True
    at, found = in_pool(episodes["goal_id"][:, 0])
    excluded[torch.arange(E)[found], at[found]] = True
    return ~excluded


def relabel_twins(
    episodes: TensorDictBase,
    e: torch.Tensor,
    t: torch.Tensor,
    goals: torch.Tensor,
    pool: torch.Tensor,
    allowed: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    *,
    environment: TextEnvironment,
) -> TensorDictBase:
    """A failure beside each hindsight success: for every relabeled section (episode ``e`` up to
    step ``t``, with ``goals`` reported at ``t``; :func:`hindsight_steps`), the same section with a
    goal of the same type that the episode never achieved, drawn uniformly among the candidates of
    a sorted, distinct ``pool`` ``allowed`` for its episode (e.g.
    :func:`scene_goals`). Reward 0 and a truncation at ``t``, marked ``relabeled``; a section whose
    episode has no candidate of its type has no twin (types: the ``environment``'s catalogue's).

    Why: HER relabels a grasp of X with "Grasp X" only, so the critic sees "Grasp" on X succeed
    under every grasp goal it is shown and never learns which goal it serves. The twin puts the same step under another
    goal of the type, where it fails, in as many copies as the successes. It is as exact as HER's
    copies: the episode the agent would have lived with that goal, up to ``t``.
    """
    candidates = unachieved_goals(episodes, pool, allowed)  # [E, P]
    catalogue_type = torch.as_tensor(require_environment(environment).catalogue.goal_type)
    sections_type, pool_type = catalogue_type[goals], catalogue_type[pool]
    chosen_e, chosen_t, chosen_goal = [], [], []
    for goal_type in sections_type.unique().tolist():  # one type at a time: [sections, goals of the type]
        of_type = sections_type == goal_type
        columns = (pool_type == goal_type).nonzero().squeeze(-1)
        allowed_here = candidates[e[of_type]][:, columns]
        keys = torch.rand(allowed_here.shape, generator=generator).masked_fill(~allowed_here, -1.0)
        top, index = keys.max(dim=1)
        has = top >= 0
        chosen_e.append(e[of_type][has])
        chosen_t.append(t[of_type][has])
        chosen_goal.append(pool[columns[index[has]]])
    if not chosen_e:
        return episodes[:0].clone()
    return _sections(episodes, torch.cat(chosen_e), torch.cat(chosen_t), torch.cat(chosen_goal), success=False)


class HindsightRelabel(Transform):
    """Appends the hindsight-relabeled copies of a batch of finished episodes to it.

    A TorchRL transform on episode batches [E, T] (``episodes.py``): called as a module, or as the
    write-side (``inv``) transform of a replay buffer of episodes. The output is [E + E', T], the
    relabeled copies flagged by ``"relabeled"``.

    Args:
        max_per_episode (int | None): at most this many relabeled goals per episode (``None``: all, the paper).
        seed (int | None): seed of the random draws (the subset above, the negatives' goals).
        negatives_per_episode (int): also this many copies per episode relabeled with goals it did not
            achieve (:func:`relabel_negatives`; 0, the paper: none).
        negatives_from (str): where the negatives' goals come from: ``"reported"``, every goal reported
            so far (``memory``, a :class:`~torchrl_glam.data.goal_memory.GoalMemory`, saved in
            ``state_dict()`` with the generator; ``None`` when there is no such pool); ``"scene"``,
            the goals of ``goal_ids`` that name only the episode's objects (:func:`scene_goals`),
            each goal type equally often.
        num_goals (int | None): the size of that memory (default: the goal catalogue's).
        goal_ids (Sequence[int] | torch.Tensor | None): the task set (the goals the social partner reports), for
            ``"scene"`` and twins.
        twins (bool): also a failure beside every relabeled success, with another goal of its type
            naming the episode's objects (:func:`relabel_twins`; ``False``, the paper: none).
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment` (or its name) of
            the episodes; ``"scene"`` and twins need its
            ``goals_in_scene``.
        relabel_goals (Sequence[int] | torch.Tensor | None): relabel only with these goals (e.g. the training goal set:
            the tasks the environment sets, where its partner also reports facts no task asks for); ``None``:
            with every reported goal (the paper).
    """

    def __init__(
        self,
        max_per_episode: int | None = None,
        seed: int | None = None,
        negatives_per_episode: int = 0,
        num_goals: int | None = None,
        negatives_from: str = "reported",
        goal_ids: Sequence[int] | torch.Tensor | None = None,
        twins: bool = False,
        *,
        environment: TextEnvironment,
        relabel_goals: Sequence[int] | torch.Tensor | None = None,
    ) -> None:
        super().__init__(in_keys=[("next", ACHIEVED_GOAL_IDS_KEY)], out_keys=[GOAL_ID_KEY, "relabeled"])
        self.environment = environment = require_environment(environment)
        if max_per_episode is not None and max_per_episode < 1:
            raise ValueError(f"max_per_episode={max_per_episode} must be at least 1 (or None for all)")
        if negatives_per_episode < 0:
            raise ValueError(f"negatives_per_episode={negatives_per_episode} must be at least 0 (0: none)")
        if negatives_from not in ("reported", "scene") or (negatives_from == "scene" and goal_ids is None):
            raise ValueError(
                f"negatives_from={negatives_from!r}: choose 'reported', or 'scene' with the task set's goal_ids"
            )
        if twins and goal_ids is None:
            raise ValueError("twins=True draws the twins' goals from the task set: pass its goal_ids")
        self.twins = twins
        self.max_per_episode, self.negatives_per_episode = max_per_episode, negatives_per_episode
        self.negatives_from = negatives_from
        self.memory = None
        if negatives_per_episode and negatives_from == "reported":
            num_goals = len(environment.catalogue) if num_goals is None else num_goals
            self.memory = GoalMemory(num_goals)
        if negatives_from == "scene" or twins:
            environment.require("goals_in_scene", "HER's scene negatives and twins")
            self.task_goals = torch.unique(torch.as_tensor(goal_ids, dtype=torch.int64))
            self.task_goal_type = torch.as_tensor(environment.catalogue.goal_type)[self.task_goals]
        self.relabel_goals = None if relabel_goals is None else torch.as_tensor(relabel_goals, dtype=torch.int64)
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)

    def _keep_goal(self, goal_ids: torch.Tensor, relabel_ids: torch.Tensor) -> torch.Tensor:
        return torch.isin(relabel_ids, self.relabel_goals)

    def forward(self, episodes: TensorDictBase) -> TensorDictBase:
        keep_goal = self._keep_goal if self.relabel_goals is not None else None
        e, t, goals = hindsight_steps(episodes, self.max_per_episode, self.generator, keep_goal)
        relabeled = _sections(episodes, e, t, goals, success=True)
        scene_negatives = bool(self.negatives_per_episode) and self.negatives_from == "scene"
        if self.twins or scene_negatives:
            scene = {k: episodes[k][:, 0] for k in self.environment.episode_keys}
            allowed = self.environment.goals_in_scene(scene, self.task_goals)
        if self.twins:
            twins = relabel_twins(
                episodes, e, t, goals, self.task_goals, allowed, self.generator, environment=self.environment
            )
            relabeled = torch.cat([relabeled, twins])
        if scene_negatives:
            negatives = relabel_negatives(
                episodes, self.negatives_per_episode, self.generator, self.task_goals, allowed, self.task_goal_type
            )
            relabeled = torch.cat([relabeled, negatives])
        elif self.memory is not None:
            ids = episodes["next", ACHIEVED_GOAL_IDS_KEY]
            count = episodes["next", ACHIEVED_GOAL_COUNT_KEY] * episodes["mask"]  # no reports past the end
            self.memory.add(ids.reshape(-1, ids.shape[-1]), count.reshape(-1), episodes["collected_at"].reshape(-1))
            pool = torch.nonzero(self.memory.known).squeeze(-1)
            negatives = relabel_negatives(episodes, self.negatives_per_episode, self.generator, pool)
            relabeled = torch.cat([relabeled, negatives])
        return torch.cat([episodes, relabeled]) if relabeled.numel() else episodes

    def _inv_call(self, episodes: TensorDictBase) -> TensorDictBase:
        return self.forward(episodes)

    # ---- checkpoints: torch's "_extra_state" entry, so ``state_dict()`` holds what a resume needs
    def get_extra_state(self) -> dict:
        """The draws' generator and, with ``negatives_from="reported"``, the goal memory."""
        state = {"generator": self.generator.get_state()}
        if self.memory is not None:
            state["goal_memory"] = self.memory.state_dict()
        return state

    def set_extra_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        if self.memory is not None:
            self.memory.load_state_dict(state["goal_memory"])


def relabel_rollout(
    rollout: TensorDictBase,
    max_steps: int,
    keep_goal: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    reported_before: torch.Tensor | None = None,
) -> TensorDictBase:
    """Hindsight-relabeled pieces of an on-policy rollout [B, T] (PPO with HER, paper App. G).

    The rollout is in TorchRL's layout (time last, ("next", "reward" / "done" / "terminated" /
    "truncated") with a trailing 1). It is cut into its episode pieces (:func:`rollout_episodes`)
    and relabeled like whole episodes (:func:`relabel_episodes`): every goal reported at step t
    gives the piece up to t with that goal, reward 1 and a terminal at t. A piece whose episode
    began in an earlier rollout is the end of the relabeled episode, which is all GAE needs (the
    section ends with a terminal), provided the goal was not reported in its earlier part:
    ``reported_before`` (bool [B, G], :class:`~torchrl_glam.algorithms.ppo_glam.rollout.Rollout` keeps it) holds
    the goals each row's episode in progress reported before the rollout (``None``: none). The
    result [E', max_steps] is in the rollout's layout again,
    with "mask" (True on the piece's steps) and "relabeled"; everything else is copied from the
    collected steps, "sample_log_prob" included: the behaviour log-probability under the
    *original* goal, the denominator of App. G's ratio.
    """
    pieces = rollout_episodes(rollout, max_steps)
    flags = ("reward", "terminated", "truncated")
    for key in flags:
        pieces["next", key] = pieces["next", key].squeeze(-1)
    before = None
    if reported_before is not None:  # each row's first piece continues the episode in progress
        B, T = rollout.shape
        done = rollout["next", "done"].reshape(B, T)
        per_row = done[:, :-1].sum(1) + 1  # pieces per row (rollout_episodes' cut)
        before = torch.zeros(len(pieces), reported_before.shape[-1], dtype=torch.bool)
        before[per_row.cumsum(0) - per_row] = reported_before.to(torch.bool).cpu()
    e, t, goals = hindsight_steps(pieces, keep_goal=keep_goal, reported_before=before)
    relabeled = _sections(pieces, e, t, goals, success=True)
    for key in flags:
        relabeled["next", key] = relabeled["next", key].unsqueeze(-1)
    relabeled["next", "done"] = relabeled["next", "terminated"] | relabeled["next", "truncated"]
    return relabeled
