"""PPO with HER (App. G): the aligned (sub-goal) rule on concrete goals, the aligned filter on a
scripted episode, and rollouts cut into episode pieces and relabeled."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_glam.data.episodes import EpisodeAssembler, rollout_episodes
from torchrl_glam.data.her import relabel_episodes, relabel_rollout
from torchrl_glam.data.subgoals import aligned_goal_filter, is_subgoal
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GoalCatalogue, PlaygroundTextEnv

PLAYGROUND = get_environment("playground")  # the environment object the library takes

CATALOGUE = GoalCatalogue.default()
SEQUENCE = "Grow red cat then grasp blue door"


@pytest.mark.parametrize(
    "sub, goal, expected",
    [
        # rule 1: same verb, the sub-goal's description names every object the goal's names
        ("Grasp any cat", "Grasp red cat", True),
        ("Grasp red animal", "Grasp red cat", True),
        ("Grasp any red thing", "Grasp red cat", True),
        ("Grasp red cat", "Grasp any cat", False),
        ("Grasp blue cat", "Grasp red cat", False),
        ("Grasp red cat", "Grasp red cat", False),  # never its own sub-goal
        ("Grow any cat", "Grow red cat", True),
        ("Grow red animal", "Grow red cat", True),
        # rule 2: grasping a supply that grows the target, or the target itself
        ("Grasp green water", "Grow red cat", True),
        ("Grasp any food", "Grow red cat", True),
        ("Grasp any supply", "Grow red cat", True),
        ("Grasp red cat", "Grow red cat", True),
        ("Grasp red animal", "Grow red cat", False),  # a red lion does not help
        ("Grasp any red thing", "Grow red cat", False),
        ("Grasp blue door", "Grow red cat", False),
        ("Grasp any water", "Grow red rose", True),
        ("Grasp any food", "Grow red rose", False),  # food grows animals only
        ("Grasp any supply", "Grow red rose", False),
        ("Grow red cat", "Grasp red cat", False),
        # rules 3 and 4: the parts of "A then b", and sequences of sub-goals of the parts
        ("Grow red cat", SEQUENCE, True),
        ("Grasp blue door", SEQUENCE, True),
        ("Grasp any door", SEQUENCE, True),
        ("Grasp any water", SEQUENCE, True),
        ("Grasp red door", SEQUENCE, False),
        ("Grow any cat then grasp any door", SEQUENCE, True),
        ("Grow blue cat then grasp blue door", SEQUENCE, False),
        (SEQUENCE, "Grow red cat", False),
    ],
)
def test_subgoal_rule_on_concrete_goals(sub, goal, expected):
    assert bool(is_subgoal(CATALOGUE, CATALOGUE.id_of(sub), CATALOGUE.id_of(goal), environment=PLAYGROUND)) is expected


def test_subgoal_rule_is_elementwise_over_arrays():
    subs = torch.tensor([CATALOGUE.id_of("Grasp any cat"), CATALOGUE.id_of("Grasp blue door")])
    goals = torch.tensor([CATALOGUE.id_of("Grasp red cat")] * 2)
    assert is_subgoal(CATALOGUE, subs, goals, environment=PLAYGROUND).tolist() == [True, False]
    assert aligned_goal_filter(environment=PLAYGROUND)(goals, subs).tolist() == [True, False]


def scripted_episode():
    """Goal "Grow red cat": grasp the door (misaligned reports), release it, grasp the water
    (aligned reports), go to the cat (the goal)."""
    env = PlaygroundTextEnv(num_envs=1, goals="simplified", text=False, seed=0)
    td = env.reset(
        TensorDict({"goal": ["Grow red cat"], "scene": [["red door", "green water", "red cat"]]}, batch_size=[1])
    )
    assembler = EpisodeAssembler(1, env.max_steps, environment=PLAYGROUND)
    for action in (0, 3, 4, 1, 3, 2):  # Go to red door, Grasp, Release, Go to green water, Grasp, Go to red cat
        td["action"] = torch.tensor([action])
        step, td = env.step_and_maybe_reset(td)
        episodes = assembler.add(step)
    assert episodes is not None and episodes["next", "terminated"].any()
    return episodes


def test_aligned_filter_keeps_only_subgoals_of_the_episode_goal():
    episodes = scripted_episode()
    every = {CATALOGUE.goals[g] for g in relabel_episodes(episodes)["goal_id"][:, 0].tolist()}
    kept = relabel_episodes(episodes, keep_goal=aligned_goal_filter(environment=PLAYGROUND))
    aligned = {CATALOGUE.goals[g] for g in kept["goal_id"][:, 0].tolist()}
    assert {"Grasp red door", "Grasp any door", "Grasp green water", "Grasp any water"} <= every
    assert {"Grasp green water", "Grasp any water", "Grasp any supply", "Grow any cat"} <= aligned
    assert not {"Grasp red door", "Grasp any door", "Grasp any green thing"} & aligned
    assert aligned == {
        g
        for g in every
        if is_subgoal(CATALOGUE, CATALOGUE.id_of(g), CATALOGUE.id_of("Grow red cat"), environment=PLAYGROUND)
    }
    # the water grasp is step 4 (index 4): its relabeled sections end there with reward 1
    water = kept[kept["goal_id"][:, 0] == CATALOGUE.id_of("Grasp green water")]
    assert water["mask"].sum().item() == 5 and water["next", "reward"][0, 4].item() == 1.0


def random_rollout(num_envs=6, steps=23, seed=0):
    """A rollout [B, T] in TorchRL's layout, long enough for episodes to cross its ends."""
    env = PlaygroundTextEnv(num_envs=num_envs, goals="simplified", text=False, seed=seed)
    td = env.reset()
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        out.append(step.exclude("action_mask", ("next", "action_mask")))
    return torch.stack(out, dim=1), env.max_steps


def test_rollout_pieces_partition_the_rollout_at_episode_ends():
    rollout, max_steps = random_rollout()
    pieces = rollout_episodes(rollout, max_steps)
    assert pieces["mask"].sum().item() == rollout.numel()
    done = pieces["next", "done"].squeeze(-1) & pieces["mask"]
    length = pieces["mask"].sum(-1)
    last = length - 1
    assert not done[torch.arange(max_steps) < last[:, None]].any()  # done only at a piece's last step
    steps, flat = pieces[pieces["mask"]], rollout.reshape(-1)
    for key in ("goal_id", "agent_on", "action", ("next", "reward")):  # row order, then time order
        assert torch.equal(steps[key], flat[key]), key
    assert len(pieces) > len(rollout) and (length < max_steps).any()  # episodes cross the rollout's ends


def test_relabeled_rollout_pieces_end_where_their_goal_was_reported():
    rollout, max_steps = random_rollout()
    relabeled = relabel_rollout(rollout, max_steps)
    assert len(relabeled) > 0 and relabeled["relabeled"].all()
    for piece in relabeled:
        end = piece["mask"].sum().item() - 1
        goal = piece["goal_id"][0].item()
        assert (piece["goal_id"] == goal).all()
        assert piece["next", "reward"].squeeze(-1).tolist() == [float(t == end) for t in range(max_steps)]
        assert piece["next", "done"][end].item() and not piece["next", "done"][:end].any()
        reports = piece["next", "achieved_goal_ids"][end, : piece["next", "achieved_goal_count"][end]]
        assert goal in reports.tolist()
    aligned = relabel_rollout(rollout, max_steps, aligned_goal_filter(environment=PLAYGROUND))
    assert 0 < len(aligned) < len(relabeled)
