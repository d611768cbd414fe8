"""The step rules, the social partner and the reward, one spec rule per test."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_glam.envs.playground import PlaygroundTextEnv

FIGURE3_SCENE = ["green water", "green mouse", "blue rose", "red rose", "blue lion", "red food"]
FIGURE3_PROMPT = (
    "Goal: Grow green mouse then grow blue rose\n"
    "You see: green water, green mouse, blue rose, red rose, blue lion, red food\n"
    "You are on: nothing\n"
    "You are holding: nothing\n"
    "You have grown: nothing\n"
    "Action: "
)


class Episode:
    """One sub-environment driven by action texts, recording rewards and reports."""

    def __init__(self, goal, scene, max_steps=10):
        goals = "train" if len(scene) >= 4 else "simplified"
        self.env = PlaygroundTextEnv(num_envs=1, num_objects=len(scene), goals=goals, max_steps=max_steps, seed=0)
        self.td = self.env.reset(TensorDict({"goal": [goal], "scene": [scene]}, batch_size=[1]))
        self.rewards, self.reports = [], []

    @property
    def prompt(self):
        return self.td["prompt"][0]

    def do(self, action_text):
        index = self.td["actions"][0].index(action_text)
        self.td.set("action", torch.tensor([index]))
        out = self.env.step(self.td)
        self.rewards.append(out["next", "reward"].item())
        self.reports.append(list(out["next", "achieved_goals"][0]))
        self.done = out["next", "done"].item()
        self.terminated = out["next", "terminated"].item()
        self.truncated = out["next", "truncated"].item()
        self.td = out["next"].clone()
        return self

    def line(self, start):
        return next(line for line in self.prompt.split("\n") if line.startswith(start))


def test_figure3_prompt_is_reproduced_character_for_character():
    ep = Episode("Grow green mouse then grow blue rose", FIGURE3_SCENE)
    assert ep.prompt == FIGURE3_PROMPT
    assert ep.td["actions"][0] == [f"Go to {o}" for o in FIGURE3_SCENE] + ["Grasp", "Release"]
    assert ep.td["goal"][0] == "Grow green mouse then grow blue rose"


@pytest.mark.parametrize(
    "goal, scene, actions",
    [
        ("Grasp red chair", ["blue cat", "red chair", "green water"], ["Go to red chair", "Grasp"]),
        (
            "Grow any cactus",
            ["blue cactus", "red water", "green door"],
            ["Go to red water", "Grasp", "Go to blue cactus"],
        ),
        (
            "Grow red cat then grasp blue door",
            ["red cat", "red food", "blue door", "green table", "blue lion", "red sofa"],
            ["Go to red food", "Grasp", "Go to red cat", "Release", "Go to blue door", "Grasp"],
        ),
        # the longest optimal solution: food for the animal, then water for the plant
        (
            "Grow green mouse then grow blue rose",
            FIGURE3_SCENE,
            [
                "Go to red food",
                "Grasp",
                "Go to green mouse",
                "Release",
                "Go to green water",
                "Grasp",
                "Go to blue rose",
            ],
        ),
    ],
)
def test_scripted_solutions_succeed_in_their_optimal_number_of_steps(goal, scene, actions):
    ep = Episode(goal, scene)
    for action in actions:
        ep.do(action)
    assert ep.rewards == [0.0] * (len(actions) - 1) + [1.0]
    assert ep.terminated and not ep.truncated
    assert goal in ep.reports[-1] or goal not in _reported_set(ep)


def _reported_set(ep):
    return {ep.env.catalogue.goals[i] for i in ep.env.rules.reportable.nonzero()[0]}


def test_grasp_picks_up_furniture_and_it_is_no_longer_seen_nor_on():
    ep = Episode("Grasp any furniture", ["red door", "blue cat", "green food"])
    ep.do("Go to red door")
    assert ep.line("You are on") == "You are on: red door"
    ep.do("Grasp")
    assert ep.rewards[-1] == 1.0
    assert ep.line("You see") == "You see: blue cat, green food"
    assert ep.line("You are on") == "You are on: nothing"
    assert ep.line("You are holding") == "You are holding: red door"
    assert set(ep.reports[-1]) >= {
        "Grasp red door",
        "Grasp any door",
        "Grasp any red thing",
        "Grasp red furniture",
        "Grasp any furniture",
    }


def test_grasp_with_a_full_hand_or_on_nothing_does_nothing():
    ep = Episode("Grasp blue cat", ["red door", "blue cat", "green food"])
    ep.do("Grasp")  # on nothing
    assert ep.reports[-1] == [] and ep.line("You are holding") == "You are holding: nothing"
    ep.do("Go to red door").do("Grasp").do("Go to blue cat").do("Grasp")  # hand full
    assert ep.line("You are holding") == "You are holding: red door"
    assert ep.line("You are on") == "You are on: blue cat"
    assert ep.rewards == [0.0] * 5 and ep.reports[-1] == []


def test_go_to_the_held_object_is_masked_and_refused():
    ep = Episode("Grasp blue cat", ["red door", "blue cat", "green food"])
    ep.do("Go to red door").do("Grasp")
    assert ep.td["action_mask"][0].tolist() == [False, True, True, True, True]
    ep.td.set("action", torch.tensor([0]))
    with pytest.raises(ValueError, match=r"'Go to red door'.*is masked.*holds red door"):
        ep.env.step(ep.td)


def test_out_of_range_action_is_refused():
    ep = Episode("Grasp blue cat", ["red door", "blue cat", "green food"])
    ep.td.set("action", torch.tensor([5]))
    with pytest.raises(ValueError, match="action 5 .* out of range"):
        ep.env.step(ep.td)


def test_release_puts_the_object_down_where_the_agent_stands_and_the_agent_is_on_it():
    ep = Episode("Grasp any lion", ["red door", "blue cat", "green table"])
    ep.do("Go to red door").do("Grasp").do("Go to green table").do("Release")
    assert ep.line("You are on") == "You are on: red door"
    assert ep.line("You are holding") == "You are holding: nothing"
    assert ep.line("You see") == "You see: red door, blue cat, green table"
    ep.do("Release")  # empty hand: nothing happens
    assert ep.line("You are on") == "You are on: red door" and ep.reports[-1] == []


def test_carrying_an_animal_to_a_supply_grows_it_on_arrival():
    ep = Episode("Grow blue cat", ["red food", "blue cat", "green table"])
    ep.do("Go to blue cat").do("Grasp").do("Go to green table")
    assert ep.rewards == [0.0, 0.0, 0.0]
    ep.do("Go to red food")
    assert ep.rewards[-1] == 1.0 and "Grow any animal" in ep.reports[-1]
    assert "Grow any living_thing" not in ep.reports[-1]  # held out: not a training goal


def test_release_onto_a_supply_puts_it_down_there_and_grows_nothing_twice():
    ep = Episode("Grasp any lion", ["red food", "blue cat", "green water"])
    ep.do("Go to blue cat").do("Grasp").do("Go to red food")  # the cat grows on arrival
    assert "Grow blue cat" in ep.reports[-1]
    ep.do("Release")  # onto the food: put down, agent on it, no second growth
    assert ep.line("You are on") == "You are on: blue cat" and ep.reports[-1] == []
    assert ep.line("You see") == "You see: red food, blue cat, green water"
    ep.do("Go to red food").do("Grasp").do("Go to green water").do("Release")  # supply on supply
    assert ep.reports[-4:] == [
        [],
        ["Grasp red food", "Grasp red supply", "Grasp any food", "Grasp any supply", "Grasp any red thing"],
        [],
        [],
    ]
    assert ep.line("You are on") == "You are on: red food"
    assert ep.line("You have grown") == "You have grown: blue cat"


def test_food_does_not_grow_plants_water_does():
    ep = Episode("Grow red rose", ["red rose", "blue food", "green water"])
    ep.do("Go to blue food").do("Grasp").do("Go to red rose")
    assert ep.rewards == [0.0, 0.0, 0.0] and ep.reports[-1] == []
    ep.do("Release").do("Go to green water").do("Grasp").do("Go to red rose")
    assert ep.rewards[-1] == 1.0
    assert ep.line("You have grown") == "You have grown: red rose"


def test_food_grows_animals_and_water_grows_animals():
    for supply in ["red food", "red water"]:
        ep = Episode("Grow any dog", ["blue dog", supply, "green door"])
        ep.do(f"Go to {supply}").do("Grasp").do("Go to blue dog")
        assert ep.rewards == [0.0, 0.0, 1.0]


def test_growing_twice_changes_nothing():
    ep = Episode("Grow any lion then grow any cat", ["blue cat", "red water", "green lion", "red chair"])
    ep.do("Go to red water").do("Grasp").do("Go to blue cat")
    assert "Grow blue cat" in ep.reports[-1]
    ep.do("Go to green lion")
    assert "Grow green lion" in ep.reports[-1]
    ep.do("Go to blue cat")  # the cat has grown already: no event, no report
    assert ep.reports[-1] == [] and ep.rewards == [0.0] * 5
    assert ep.line("You have grown") == "You have grown: blue cat, green lion"


def test_sequential_goal_needs_the_grow_at_an_earlier_step():
    # growing red cat reports "Grow red cat" and "Grow any cat" at the same step: no pairing
    ep = Episode("Grow any cat then grow red cat", ["red cat", "blue cat", "red water", "green door"])
    ep.do("Go to red water").do("Grasp").do("Go to red cat")
    assert "Grow any cat then grow red cat" not in ep.reports[-1] and ep.rewards[-1] == 0.0
    assert "Grow red cat" in ep.reports[-1] and "Grow any cat" in ep.reports[-1]
    ep.do("Go to blue cat")
    assert "Grow red cat then grow blue cat" in ep.reports[-1]
    assert "Grow any cat then grow blue cat" in ep.reports[-1]
    assert ep.rewards[-1] == 0.0  # blue cat is not red cat
    ep = Episode("Grow any cat then grow red cat", ["red cat", "blue cat", "red water", "green door"])
    ep.do("Go to red water").do("Grasp").do("Go to blue cat").do("Go to red cat")
    assert ep.rewards == [0.0, 0.0, 0.0, 1.0]


def test_each_goal_is_reported_at_most_once_per_episode():
    ep = Episode("Grasp any lion", ["red cat", "blue door", "green table"])
    ep.do("Go to red cat").do("Grasp").do("Release").do("Grasp")
    assert "Grasp red cat" in ep.reports[1] and ep.reports[3] == []


def test_truncated_at_max_steps():
    ep = Episode("Grasp any lion", ["red cat", "blue door", "green table"], max_steps=3)
    ep.do("Grasp").do("Grasp")
    assert not ep.done
    ep.do("Grasp")
    assert ep.done and ep.truncated and not ep.terminated


def test_only_goals_of_the_task_set_are_reported():
    # "Grasp any flower" is held out: a training env does not report it, an evaluation env does
    scene = ["red flower", "blue door", "green table"]
    ep = Episode("Grasp red flower", scene)
    ep.do("Go to red flower").do("Grasp")
    assert ep.rewards[-1] == 1.0  # the reward does not depend on what is reported
    assert "Grasp red flower" not in ep.reports[-1] and "Grasp any plant" in ep.reports[-1]
    env = PlaygroundTextEnv(num_envs=1, num_objects=3, goals="held_out", seed=0)
    td = env.reset(TensorDict({"goal": ["Grasp red flower"], "scene": [scene]}, batch_size=[1]))
    for index in [0, 3]:
        td.set("action", torch.tensor([index]))
        td = env.step(td)["next"].clone()
    assert "Grasp red flower" in td["achieved_goals"][0] and "Grasp any plant" in td["achieved_goals"][0]
