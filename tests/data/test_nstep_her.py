"""n-step returns and hindsight relabeling on hand-computed episodes, and on real ones."""

from collections import Counter

import pytest
import torch
from tensordict import TensorDict

from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.data.her import (
    HindsightRelabel,
    hindsight_steps,
    relabel_episodes,
    relabel_negatives,
    scene_goals,
    unachieved_goals,
)
from torchrl_glam.data.nstep import NStepReturns, nstep_transitions
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GOAL_TYPES, OBJECT_NAMES, PlaygroundTextEnv

PLAYGROUND = get_environment("playground")  # the environment object the library takes

K = 4  # report slots in the hand-made episodes


def make_episode(length, max_steps, terminated, reports=(), goal=7):
    """One padded episode [1, max_steps]: agent_on after step t is t (to trace the next state),
    reports = [(t, goal_id), ...]."""
    T = max_steps
    t = torch.arange(T)
    mask = t < length
    reward = ((t == length - 1) & terminated & mask).float()
    ids = torch.full((T, K), -1)
    count = torch.zeros(T, dtype=torch.long)
    for step, g in reports:
        ids[step, count[step]] = g
        count[step] += 1
    td = TensorDict(
        {
            "goal_id": torch.full((T,), goal),
            "objects": torch.zeros(T, 3, dtype=torch.long),
            "agent_on": t - 1,
            "held": torch.full((T,), -1),
            "grown": torch.zeros(T, 3, dtype=torch.bool),
            "action": t % 5,
            "mask": mask,
            "relabeled": torch.zeros(T, dtype=torch.bool),
            "collected_at": t * 10,
            "next": {
                "agent_on": t,
                "held": torch.full((T,), -1),
                "grown": torch.zeros(T, 3, dtype=torch.bool),
                "reward": reward,
                "terminated": reward > 0,
                "truncated": (t == length - 1) & ~torch.tensor(terminated) & mask,
                "achieved_goal_ids": ids,
                "achieved_goal_count": count,
            },
        },
        batch_size=[T],
    )
    return td.unsqueeze(0)


def bootstrap_factor(out, gamma):
    """The factor of V(next) in TorchRL's TD(0) target on these transitions."""
    from torchrl.objectives.value import TD0Estimator

    estimator = TD0Estimator(gamma=gamma, value_network=None)
    td = out.clone()
    td["next", "state_value"] = torch.ones_like(td["next", "reward"])
    return (estimator.value_estimate(td) - td["next", "reward"]).squeeze(-1).tolist()


def test_nstep_with_a_terminal_inside_the_window():
    out = nstep_transitions(make_episode(5, 10, terminated=True), n=3, gamma=0.5, environment=PLAYGROUND)
    assert out.shape == (5,)
    assert out["next", "reward"].squeeze(-1).tolist() == [0.0, 0.0, 0.25, 0.5, 1.0]
    assert out["next", "done"].squeeze(-1).tolist() == [False, False, True, True, True]
    assert out["steps_to_next_obs"].tolist() == [3, 3, 3, 2, 1]
    # bootstrap from the state after the window's last step, not from the terminal state
    assert out["next", "agent_on"].tolist() == [2, 3, 4, 4, 4]
    assert bootstrap_factor(out, 0.5) == [0.125, 0.125, 0.0, 0.0, 0.0]


def test_nstep_at_a_truncation_bootstraps_with_gamma_to_the_steps_available():
    out = nstep_transitions(make_episode(4, 4, terminated=False), n=3, gamma=0.5, environment=PLAYGROUND)
    assert out["next", "reward"].squeeze(-1).tolist() == [0.0] * 4
    assert out["next", "done"].squeeze(-1).tolist() == [False] * 4
    assert out["steps_to_next_obs"].tolist() == [3, 3, 2, 1]
    assert bootstrap_factor(out, 0.5) == [0.125, 0.125, 0.25, 0.5]
    assert out["next", "agent_on"].tolist() == [2, 3, 3, 3]


def test_nstep_can_end_the_return_at_a_time_limit_like_at_a_terminal():
    # bootstrap_time_limit=False: the last steps of a truncated episode have nothing to bootstrap
    # from (a failed episode's value is anchored at 0), as with one pre-Gymnasium "done"
    out = nstep_transitions(
        make_episode(4, 4, terminated=False), n=3, gamma=0.5, bootstrap_time_limit=False, environment=PLAYGROUND
    )
    assert out["next", "reward"].squeeze(-1).tolist() == [0.0] * 4
    assert out["next", "terminated"].squeeze(-1).tolist() == [False, True, True, True]
    assert bootstrap_factor(out, 0.5) == [0.125, 0.0, 0.0, 0.0]
    # a terminal is unchanged
    ended = NStepReturns(n=3, gamma=0.5, bootstrap_time_limit=False, environment=PLAYGROUND)(
        make_episode(5, 10, terminated=True)
    )
    assert bootstrap_factor(ended, 0.5) == [0.125, 0.125, 0.0, 0.0, 0.0]


def test_one_step_returns_are_plain_transitions():
    out = NStepReturns(n=1, gamma=0.99, environment=PLAYGROUND)(make_episode(3, 5, terminated=True))
    assert out["next", "reward"].squeeze(-1).tolist() == [0.0, 0.0, 1.0]
    assert out["next", "agent_on"].tolist() == [0, 1, 2]
    assert bootstrap_factor(out, 0.99) == pytest.approx([0.99, 0.99, 0.0])
    with pytest.raises(ValueError, match="n=0"):
        nstep_transitions(make_episode(3, 5, True), n=0, gamma=0.9, environment=PLAYGROUND)


def test_her_sections_end_at_the_reporting_step_with_the_reported_goal():
    episode = make_episode(6, 8, terminated=False, reports=[(1, 11), (1, 12), (4, 13)])
    relabeled = relabel_episodes(episode)
    assert relabeled.shape == (3, 8)
    assert relabeled["goal_id"][:, 0].tolist() == [11, 12, 13]
    assert relabeled["mask"].sum(-1).tolist() == [2, 2, 5]  # steps 0..t, nothing after t
    assert relabeled["next", "reward"][0].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
    assert relabeled["next", "terminated"][2].tolist() == [False] * 4 + [True] + [False] * 3
    assert relabeled["relabeled"].all() and not relabeled["next", "truncated"].any()
    out = nstep_transitions(relabeled, n=3, gamma=0.5, environment=PLAYGROUND)
    # the first section: 2 transitions, both see the reward of step 1 within their window
    first = out[:2]
    assert first["next", "reward"].squeeze(-1).tolist() == [0.5, 1.0]
    assert first["next", "done"].all() and first["relabeled"].all()
    assert (first["goal_id"] == 11).all()


def test_her_skips_the_episodes_own_goal_and_caps_goals_per_episode():
    episode = make_episode(3, 5, terminated=True, reports=[(0, 21), (2, 7), (2, 22)], goal=7)
    relabeled = relabel_episodes(episode)
    assert sorted(relabeled["goal_id"][:, 0].tolist()) == [21, 22]
    two = torch.cat([episode, make_episode(5, 5, False, reports=[(1, 30), (2, 31), (3, 32)])])
    capped = relabel_episodes(two, max_per_episode=1, generator=torch.Generator().manual_seed(0))
    assert capped.shape[0] == 2 and capped["goal_id"][0, 0] in (21, 22) and capped["goal_id"][1, 0] in (30, 31, 32)
    transform = HindsightRelabel(environment=PLAYGROUND)
    both = transform(episode)
    assert both.shape == (3, 5) and both["relabeled"][:, 0].tolist() == [False, True, True]
    assert torch.equal(transform.inv(episode)["goal_id"], both["goal_id"])
    with pytest.raises(ValueError, match="max_per_episode=0"):
        HindsightRelabel(max_per_episode=0, environment=PLAYGROUND)


def random_play_episodes(goals: str, steps: int, env=None, environment=PLAYGROUND):
    """The environment (default: Playground-Text's, 16 sub-environments) and the episodes a
    uniformly random legal policy finished in ``steps`` steps, assembled [E, max_steps]."""
    env = env or PlaygroundTextEnv(num_envs=16, goals=goals, seed=0, text=False)
    assembler = EpisodeAssembler(env.num_envs, env.max_steps, environment=environment)
    td = env.reset()
    gen = torch.Generator().manual_seed(0)
    episodes = []
    for _ in range(steps):
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1))
        step, td = env.step_and_maybe_reset(td)
        finished = assembler.add(step)
        if finished is not None:
            episodes.append(finished)
    return env, torch.cat(episodes)


def test_twins_on_babyai_name_the_room_and_fail_where_the_success_succeeded():
    """BabyAI-Text's twins: each relabeled success's steps under another goal of its kind that fits
    the episode's room (minigrid's descriptions: "the" for one fitting object, "a" for several) and
    that the episode never achieved; reward 0, a truncation at the same step."""
    pytest.importorskip("minigrid")
    from torchrl_glam.envs.babyai import BabyAITextEnv

    environment = get_environment("babyai")
    env = BabyAITextEnv(num_envs=16, seed=0, text=False, max_steps=16)
    _, episodes = random_play_episodes("train", 64, env, environment)
    train = environment.catalogue.goal_set("train")
    plain = HindsightRelabel(seed=0, goal_ids=train, environment=environment)(episodes)[len(episodes) :]
    out = HindsightRelabel(seed=0, twins=True, goal_ids=train, environment=environment)(episodes)[len(episodes) :]
    successes, twins = out[: len(plain)], out[len(plain) :]
    assert len(plain) > 20 and len(twins) > 0.5 * len(plain)
    assert (twins["next", "reward"] == 0).all() and not twins["next", "terminated"].any()
    kinds = torch.from_numpy(environment.catalogue.goal_type)

    # each twin sits beside a success of its kind: same episode (actions, room), same end
    def key(td):
        return [
            (tuple(a), tuple(o), int(m), int(kinds[g]))
            for a, o, m, g in zip(
                td["action"].tolist(),
                td["objects"][:, 0].flatten(1).tolist(),
                td["mask"].sum(-1).tolist(),
                td["goal_id"][:, 0].tolist(),
            )
        ]

    assert Counter(key(twins)) <= Counter(key(successes))
    for twin in twins:
        room, goal = twin["objects"][0], int(twin["goal_id"][0])
        assert environment.catalogue.goals_in_scene(room.numpy())[goal]  # it names the room's objects
        episode = episodes[
            (episodes["action"] == twin["action"]).all(-1) & (episodes["objects"][:, 0] == room).flatten(1).all(-1)
        ][0]
        reported = episode["next", "achieved_goal_ids"][episode["next", "achieved_goal_ids"] >= 0]
        assert goal not in reported.tolist()  # and the episode never achieved it


def test_real_episodes_relabeled_replay_exactly_in_the_environment():
    """Assembled from a real rollout, every relabeled section's terminal step is where the social
    partner reported its goal, and the n-step returns of relabeled data are 1 at that step."""
    env, episodes = random_play_episodes("simplified", steps=30)
    assert episodes.shape[1] == env.max_steps and len(episodes) >= 16
    lengths = episodes["mask"].sum(-1)
    ended = episodes["next", "terminated"] | episodes["next", "truncated"]
    assert (ended.sum(-1) == 1).all() and ended[torch.arange(len(episodes)), lengths - 1].all()
    relabeled = relabel_episodes(episodes)
    assert len(relabeled) > len(episodes)
    out = nstep_transitions(relabeled, n=3, gamma=0.99, environment=PLAYGROUND)
    final = out["steps_to_next_obs"] == 1
    assert (out["next", "reward"][final] == 1).all() and out["next", "done"][final].all()
    # the relabeled goals are training goals (the social partner reports the task set only)
    assert set(relabeled["goal_id"].unique().tolist()) <= set(env.rules.goal_ids.tolist())


def test_negatives_relabel_with_goals_reported_elsewhere_in_the_batch_and_never_achieve_them():
    achieved = make_episode(3, 5, terminated=True, reports=[(0, 21), (2, 7), (2, 22)], goal=7)
    truncated = make_episode(5, 5, terminated=False, reports=[(1, 30), (3, 31), (3, 21)], goal=8)
    negatives = relabel_negatives(
        torch.cat([achieved, truncated]), per_episode=5, generator=torch.Generator().manual_seed(0)
    )
    goals = negatives["goal_id"][:, 0]
    first = negatives["mask"].sum(-1) == 3  # the copies of the first episode
    # distinct goals of the other episode that this one never achieved (nor its own goal 7)
    assert sorted(goals[first].tolist()) == [30, 31] and sorted(goals[~first].tolist()) == [7, 22]
    assert (negatives["next", "reward"] == 0).all() and not negatives["next", "terminated"].any()
    # a truncation at each copy's last step: the episode with that goal would have gone on
    assert negatives["next", "truncated"].sum(-1).tolist() == [1] * 4
    assert negatives["next", "truncated"][first][:, 2].all() and negatives["next", "truncated"][~first][:, 4].all()
    assert negatives["relabeled"].all()
    out = nstep_transitions(negatives, n=3, gamma=0.5, environment=PLAYGROUND)
    assert (out["next", "reward"] == 0).all() and not out["next", "done"].any()
    assert bootstrap_factor(out, 0.5)[:3] == [0.125, 0.25, 0.5]  # the first copy bootstraps at its end
    # the transform draws among every goal reported so far, in earlier batches too
    transform = HindsightRelabel(negatives_per_episode=1, seed=0, environment=PLAYGROUND)
    first_batch = transform(achieved)
    assert len(first_batch) == 1 + 2  # the episode, its 2 reported goals; nothing else reported yet
    second_batch = transform(truncated)
    assert len(second_batch) == 1 + 3 + 1 and second_batch["goal_id"][-1, 0] in (7, 22)
    assert second_batch["next", "reward"][-1].sum() == 0
    assert sorted(transform.memory.ids().tolist()) == [7, 21, 22, 30, 31]
    with pytest.raises(ValueError, match="negatives_per_episode=-1"):
        HindsightRelabel(negatives_per_episode=-1, environment=PLAYGROUND)


@pytest.mark.parametrize("source", ["reported", "scene", "twins"])
def test_real_episodes_relabeled_with_negatives_replay_exactly_in_the_environment(source):
    """Each negative, replayed with its actions in its scene and its goal as the episode's goal,
    gives reward 0 at every step and never terminates: the copy is the episode the agent would
    have lived."""
    env, episodes = random_play_episodes("train", steps=40)
    if source == "reported":
        negatives = relabel_negatives(episodes, per_episode=3, generator=torch.Generator().manual_seed(1))
    else:  # the transform's relabeled copies that fail: its scene negatives, or its twins
        options = {"negatives_per_episode": 3, "negatives_from": "scene"} if source == "scene" else {"twins": True}
        relabeled = HindsightRelabel(
            seed=1, goal_ids=env.catalogue.goal_set("train"), environment=PLAYGROUND, **options
        )(episodes)[len(episodes) :]
        negatives = relabeled[relabeled["next", "reward"].sum(-1) == 0]
    assert len(negatives) > 16
    replay_env = PlaygroundTextEnv(num_envs=len(negatives), goals="train", text=False)
    td = replay_env.reset(
        TensorDict(
            {
                "goal": [env.catalogue.goals[g] for g in negatives["goal_id"][:, 0].tolist()],
                "scene": [[OBJECT_NAMES[i] for i in objects] for objects in negatives["objects"][:, 0].tolist()],
            },
            batch_size=[len(negatives)],
        )
    )
    length = negatives["mask"].sum(-1)
    for t in range(int(length.max())):
        td.set("action", negatives["action"][:, t])
        td = replay_env.step(td)["next"]
        active = t < length
        assert (td["reward"].squeeze(-1)[active] == 0).all() and not td["terminated"].squeeze(-1)[active].any()
        td = td.exclude("reward", "done", "terminated", "truncated")


def test_scene_goals_are_the_goals_naming_only_the_scenes_objects():
    env, episodes = random_play_episodes("train", steps=12)
    catalogue, train = env.catalogue, torch.from_numpy(env.catalogue.goal_set("train"))
    objects = episodes["objects"][:4, 0]
    in_scene = scene_goals(objects, train, environment=PLAYGROUND)
    for scene, row in zip(objects.tolist(), in_scene):
        names = {OBJECT_NAMES[o] for o in scene}

        def names_an_object(single, names=names):
            verb, description = catalogue.single_part_descriptions[single]
            return bool(names & set(catalogue.matching_objects(description, growable_only=verb == "Grow")))

        expected = [all(names_an_object(p) for p in catalogue.parts[g] if p >= 0) for g in train.tolist()]
        assert row.tolist() == expected and 0 < sum(expected) < len(expected)


def test_scene_negatives_name_the_episodes_objects_and_draw_goal_types_equally_often():
    env, episodes = random_play_episodes("train", steps=40)
    train = env.catalogue.goal_set("train")
    transform = HindsightRelabel(
        negatives_per_episode=1, seed=0, negatives_from="scene", goal_ids=train, environment=PLAYGROUND
    )
    drawn = []
    for _ in range(20):
        out = transform(episodes)
        negatives = out[len(episodes) :][out[len(episodes) :]["next", "reward"].sum(-1) == 0]
        assert len(negatives) == len(episodes)  # one per episode: every scene has candidates
        goals = negatives["goal_id"][:, 0]
        assert scene_goals(negatives["objects"][:, 0], goals, environment=PLAYGROUND).diagonal().all()
        assert set(goals.tolist()) <= set(train.tolist())
        ids, reported = episodes["next", "achieved_goal_ids"], episodes["next", "achieved_goal_count"]
        for e, g in enumerate(goals.tolist()):  # never a goal the episode achieved, nor its own
            slots = torch.arange(ids.shape[-1]) < reported[e].unsqueeze(-1)
            assert g not in ids[e][slots & episodes["mask"][e].unsqueeze(-1)].tolist()
            assert g != int(episodes["goal_id"][e, 0])
        drawn += goals.tolist()
    types = torch.bincount(torch.as_tensor(env.catalogue.goal_type[drawn]), minlength=len(GOAL_TYPES))
    # 97.85% of the training goals are sequential: uniform draws would give singles ~2%
    assert (types / types.sum() - 0.25).abs().max() < 0.06, types
    with pytest.raises(ValueError, match="negatives_from='scenes'"):
        HindsightRelabel(negatives_per_episode=1, negatives_from="scenes", goal_ids=train, environment=PLAYGROUND)


def test_twins_fail_at_each_hindsight_success_with_another_goal_of_its_type():
    """Every relabeled success gets one twin: the same steps, ending at the same step with a
    truncation and reward 0, under a goal of the same type that names the scene's objects and was
    never achieved in the episode. So a grasp goal gets as many failed grasps as successful ones."""
    env, episodes = random_play_episodes("train", steps=40)
    train = env.catalogue.goal_set("train")
    plain = HindsightRelabel(seed=0, goal_ids=train, environment=PLAYGROUND)(episodes)[len(episodes) :]
    out = HindsightRelabel(seed=0, twins=True, goal_ids=train, environment=PLAYGROUND)(episodes)[len(episodes) :]
    successes, twins = out[: len(plain)], out[len(plain) :]
    assert (successes["goal_id"] == plain["goal_id"]).all()  # the successes are HER's, unchanged
    assert (twins["next", "reward"] == 0).all() and not twins["next", "terminated"].any()
    catalogue_type = torch.from_numpy(env.catalogue.goal_type)

    # pair each twin with its success: same episode (actions, scene), same end, same goal type
    def key(td):
        return [
            (tuple(a), tuple(o), int(m), int(catalogue_type[g]))
            for a, o, m, g in zip(
                td["action"].tolist(),
                td["objects"][:, 0].tolist(),
                td["mask"].sum(-1).tolist(),
                td["goal_id"][:, 0].tolist(),
            )
        ]

    # a success whose scene has no unachieved goal of its type left (grow goals can run out) has none
    pool = torch.from_numpy(train).unique()
    e, _, goals = hindsight_steps(episodes)
    candidates = unachieved_goals(episodes, pool, scene_goals(episodes["objects"][:, 0], pool, environment=PLAYGROUND))[
        e
    ]
    has_twin = (candidates & (catalogue_type[pool] == catalogue_type[goals].unsqueeze(1))).any(1)
    assert 0.5 < has_twin.float().mean() < 1
    assert sorted(key(twins)) == sorted(key(successes[has_twin]))
    last = twins["mask"].sum(-1) - 1
    assert twins["next", "truncated"][torch.arange(len(twins)), last].all()
    assert scene_goals(twins["objects"][:, 0], twins["goal_id"][:, 0], environment=PLAYGROUND).diagonal().all()
    grasp = GOAL_TYPES.index("grasp")
    assert (catalogue_type[twins["goal_id"][:, 0]] == grasp).sum() > 0
    out_nstep = nstep_transitions(twins, n=3, gamma=0.5, environment=PLAYGROUND)
    assert (out_nstep["next", "reward"] == 0).all() and not out_nstep["next", "done"].any()
    with pytest.raises(ValueError, match="twins=True"):
        HindsightRelabel(twins=True, environment=PLAYGROUND)
