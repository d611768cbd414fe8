"""The goal grammar: counts, splits and types of the spec ("Goals")."""

import numpy as np
import pytest

from torchrl_glam.envs.playground import GOAL_TYPES, GoalCatalogue, descriptions_of_object


@pytest.fixture(scope="module")
def cat():
    return GoalCatalogue.default()


def _type_counts(cat, ids):
    types = cat.goal_type[ids]
    return {name: int((types == k).sum()) for k, name in enumerate(GOAL_TYPES)}


def test_the_grammar_forms_23426_goals_246_of_them_single(cat):
    assert len(cat) == 23_426
    assert cat.num_single == 246
    assert _type_counts(cat, np.arange(246)) == {"grasp": 151, "grow": 95, "grow-then-grasp": 0, "grow-then-grow": 0}
    assert len(set(cat.goals)) == len(cat.goals)


def test_training_task_set_is_8470_goals_97_85_percent_sequential(cat):
    assert len(cat.train_ids) == 8_470
    assert _type_counts(cat, cat.train_ids) == {
        "grasp": 136,
        "grow": 46,
        "grow-then-grasp": 6_218,
        "grow-then-grow": 2_070,
    }
    sequential = (cat.goal_type[cat.train_ids] >= 2).mean()
    assert round(100 * sequential, 2) == 97.85


def test_simplified_and_held_out_sets(cat):
    assert _type_counts(cat, cat.simplified_ids) == {
        "grasp": 136,
        "grow": 46,
        "grow-then-grasp": 0,
        "grow-then-grow": 0,
    }
    assert _type_counts(cat, cat.held_out_ids) == {"grasp": 15, "grow": 49, "grow-then-grasp": 0, "grow-then-grow": 0}
    assert not set(cat.train_ids) & set(cat.held_out_ids)
    held_out = {cat.goals[i] for i in cat.held_out_ids}
    for goal in [
        "Grasp red tree",
        "Grow green dog",
        "Grasp blue door",
        "Grasp any flower",
        "Grasp green animal",
        "Grasp any fly",
        "Grow blue rose",
        "Grow any plant",
        "Grow red living_thing",
    ]:
        assert goal in held_out
    for goal in ["Grasp blue tree", "Grow red fly", "Grasp any red thing", "Grow any animal"]:
        assert goal not in held_out


def test_sequential_goals_lower_case_the_second_part_and_skip_same_endings(cat):
    goal = "Grow red cat then grasp blue door"
    assert cat.type_of(goal) == "grow-then-grasp"
    a, b = cat.parts[cat.id_of(goal)]
    assert (cat.goals[a], cat.goals[b]) == ("Grow red cat", "Grasp blue door")
    assert "Grow any cat then grasp any cat" not in cat.goal_to_id
    assert "Grow any cat then grow any cat" not in cat.goal_to_id
    assert cat.type_of("Grow any cat then grow red cat") == "grow-then-grow"
    # a held-out part makes the sequential goal a non-training goal, but it is still a goal
    figure3 = cat.id_of("Grow green mouse then grow blue rose")
    assert figure3 not in set(cat.train_ids)


def test_text_and_id_round_trip(cat):
    for goal_id in [0, 245, 246, 10_000, 23_425]:
        assert cat.id_of(cat.goals[goal_id]) == goal_id


def test_unknown_goal_names_the_nearest_valid_goals(cat):
    with pytest.raises(ValueError, match="unknown goal 'Grasp red kat'.*Grasp red cat"):
        cat.id_of("Grasp red kat")
    with pytest.raises(ValueError, match="Grow green mouse then grow blue rose"):
        cat.id_of("Grow green mouse then grow blue roses")


def test_descriptions_of_objects_follow_the_spec():
    assert descriptions_of_object("red cat") == [
        "red cat",
        "red animal",
        "red living_thing",
        "any cat",
        "any animal",
        "any living_thing",
        "any red thing",
    ]
    assert sorted(descriptions_of_object("blue door")) == sorted(
        ["blue door", "blue furniture", "any door", "any furniture", "any blue thing"]
    )
    assert "any living_thing" not in descriptions_of_object("green water")


def test_goal_set_names_are_checked(cat):
    with pytest.raises(ValueError, match="unknown goal set 'test'"):
        cat.goal_set("test")
