"""No-op twins: the same state with a step that changes nothing, then the winning step; replayed
in the environment, on real episodes and their hindsight sections."""

import pytest
import torch
from tensordict import TensorDict

from tests.data.test_nstep_her import random_play_episodes
from torchrl_glam.data.her import HindsightRelabel
from torchrl_glam.data.noop_twins import NoOpTwins, noop_twins, successes
from torchrl_glam.data.nstep import nstep_transitions
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import OBJECT_NAMES, PlaygroundTextEnv
from torchrl_glam.envs.playground.environment import noop_actions

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def test_noop_actions_are_read_from_where_the_agent_stands_and_what_it_holds():
    # 3 objects: "Go to" 0-2, Grasp 3, Release 4
    agent_on = torch.tensor([2, -1, 0, -1])
    held = torch.tensor([-1, 1, 1, -1])
    assert noop_actions(agent_on, held, 3).nonzero().tolist() == [
        [0, 2],
        [0, 4],  # on object 2, empty hand: "Go to" it again, "Release"
        [1, 3],  # on nothing, holding 1: "Grasp"
        [2, 0],
        [2, 3],  # on 0, holding 1: "Go to" 0 again (the contact happened), "Grasp"
        [3, 3],
        [3, 4],  # on nothing, holding nothing: "Grasp", "Release"
    ]


@pytest.fixture(scope="module")
def relabeled_play():
    """Random play on the full task set with its hindsight sections: the environment, and the
    batch whose successes get twins."""
    env, episodes = random_play_episodes("train", steps=40)
    return env, HindsightRelabel(seed=0, environment=PLAYGROUND)(episodes)


def test_noop_twins_replay_exactly_in_the_environment(relabeled_play):
    """Replaying a success's actions up to its winning step, then the twin's no-op and the winner,
    in its scene with its goal: the no-op leaves the state as it was with reward 0, and the winner
    then succeeds, the episode the twin says the agent would have lived."""
    env, episodes = relabeled_play
    e, t = successes(episodes)
    keep = t + 1 < episodes.shape[1]  # successes on the last step have no twin (tested below)
    e, t = e[keep], t[keep]
    twins = noop_twins(episodes, torch.Generator().manual_seed(0), environment=PLAYGROUND)
    assert len(twins) == len(e) > 16
    assert twins["mask"].sum(-1).eq(2).all() and twins["relabeled"].all()
    assert (twins["action"][:, 1] == episodes["action"][e, t]).all()
    for end in t.unique().tolist():  # one environment per winning step, so every row ends together
        rows = (t == end).nonzero().squeeze(-1)
        source, twin = episodes[e[rows]], twins[rows]
        replay_env = PlaygroundTextEnv(num_envs=len(rows), goals="train", text=False)
        td = replay_env.reset(
            TensorDict(
                {
                    "goal": [env.catalogue.goals[g] for g in source["goal_id"][:, 0].tolist()],
                    "scene": [[OBJECT_NAMES[i] for i in objects] for objects in source["objects"][:, 0].tolist()],
                },
                batch_size=[len(rows)],
            )
        )
        for step in range(end):
            td.set("action", source["action"][:, step])
            td = replay_env.step(td)["next"].exclude("reward", "done", "terminated", "truncated")
        before = td.select("agent_on", "held", "grown").clone()
        assert (before["agent_on"] == twin["agent_on"][:, 0]).all() and (before["held"] == twin["held"][:, 0]).all()
        td.set("action", twin["action"][:, 0])
        td = replay_env.step(td)["next"]
        assert (td["reward"] == 0).all() and not td["done"].any()
        assert (td.select("agent_on", "held", "grown") == before).all()
        assert (td["achieved_goal_count"] == 0).all()
        td.set("action", twin["action"][:, 1])
        td = replay_env.step(td.exclude("reward", "done", "terminated", "truncated"))["next"]
        assert (td["reward"] == 1).all() and td["terminated"].all()


def test_noop_twins_target_gamma_for_the_noop_and_one_for_the_winner(relabeled_play):
    _, episodes = relabeled_play
    twins = noop_twins(episodes, torch.Generator().manual_seed(0), environment=PLAYGROUND)
    out = nstep_transitions(twins, n=3, gamma=0.9, environment=PLAYGROUND)
    noop, winner = out[0::2], out[1::2]
    assert torch.allclose(noop["next", "reward"], torch.full_like(noop["next", "reward"], 0.9))
    assert (winner["next", "reward"] == 1).all() and out["next", "done"].all()
    assert noop["steps_to_next_obs"].eq(2).all() and winner["steps_to_next_obs"].eq(1).all()


def test_a_success_at_the_time_limit_has_no_twin_and_failures_have_none(relabeled_play):
    _, episodes = relabeled_play
    T = episodes.shape[1]
    e, t = successes(episodes)
    at_limit = episodes[e[t == T - 1]]
    failures = episodes[~torch.isin(torch.arange(len(episodes)), e)]
    assert len(at_limit) and len(failures)
    assert (
        len(noop_twins(at_limit, environment=PLAYGROUND)) == 0
        and len(noop_twins(failures, environment=PLAYGROUND)) == 0
    )


def test_the_transform_appends_twins_and_draws_the_same_noops_from_its_seed(relabeled_play):
    _, episodes = relabeled_play
    first, second = (
        NoOpTwins(seed=3, environment=PLAYGROUND)(episodes),
        NoOpTwins(seed=3, environment=PLAYGROUND)(episodes),
    )
    twins = first[len(episodes) :]
    assert (
        len(twins) == len(noop_twins(episodes, environment=PLAYGROUND)) and (first[: len(episodes)] == episodes).all()
    )
    assert torch.equal(twins["action"], second[len(episodes) :]["action"])
    assert torch.equal(
        NoOpTwins(seed=3, environment=PLAYGROUND).inv(episodes)["action"], first["action"]
    )  # a replay buffer's write side
    assert NoOpTwins(environment=PLAYGROUND)(episodes[:0]).shape == episodes[:0].shape
