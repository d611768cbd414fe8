"""The autotelic agent's pieces: goal discovery, the learning-progress estimator, goal choice from
the memory, the neutral pre-discovery goal, and the transform's state."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs import TransformedEnv

from torchrl_glam.data.autotelic import NEUTRAL_GOAL, AutotelicGoals
from torchrl_glam.data.curriculum import LearningProgress, choose_goals, goal_groups, parse_groups
from torchrl_glam.data.goal_memory import GoalMemory
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GoalCatalogue, PlaygroundTextEnv
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES

PLAYGROUND = get_environment("playground")  # the environment object the library takes

CATALOGUE = GoalCatalogue.default()
NEUTRAL_ID = CATALOGUE.id_of(NEUTRAL_GOAL)


def random_actions(td, generator):
    return td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1))


def autotelic_env(num_envs=8, goals="simplified", strategy="lp", seed=0, **kwargs):
    base = PlaygroundTextEnv(num_envs=num_envs, goals=goals, seed=seed, text=False)
    choice = AutotelicGoals(num_envs, base.num_objects, strategy=strategy, seed=seed, environment=PLAYGROUND, **kwargs)
    return TransformedEnv(base, choice), choice


# ---------------------------------------------------------------- discovery
def test_memory_adds_exactly_the_valid_reports_with_their_first_step():
    memory = GoalMemory(len(CATALOGUE))
    ids = torch.tensor([[5, 9, 7], [9, 3, -1], [11, -1, -1]])
    count = torch.tensor([2, 2, 0])  # row 0's third id and row 2's first are past the count
    new = memory.add(ids, count, torch.tensor([100, 101, 102]))
    assert new.tolist() == [3, 5, 9]
    assert torch.nonzero(memory.known).squeeze(-1).tolist() == [3, 5, 9]
    assert memory.first_seen[[3, 5, 9]].tolist() == [101, 100, 100]  # 9 in two rows: the earlier
    assert memory.add(torch.tensor([[9, 4]]), torch.tensor([2]), 200).tolist() == [4]
    assert memory.first_seen[9] == 100 and memory.first_seen[4] == 200  # a known goal keeps its step
    assert memory.ids().tolist() == [5, 9, 3, 4] and len(memory) == 4


def test_memory_refuses_ids_outside_the_catalogue():
    with pytest.raises(ValueError, match="achieved_goal_count"):
        GoalMemory(10).add(torch.tensor([[3, 12]]), torch.tensor([2]), 0)


def test_discovery_through_the_env_holds_exactly_the_reported_goals():
    env, choice = autotelic_env(num_envs=8)
    gen = torch.Generator().manual_seed(1)
    td = env.reset()
    expected: dict[int, int] = {}
    for t in range(60):
        step, td = env.step_and_maybe_reset(random_actions(td, gen))
        ids, count = step["next", "achieved_goal_ids"], step["next", "achieved_goal_count"]
        for b in range(8):
            for goal in ids[b, : count[b]].tolist():
                expected.setdefault(goal, t * 8 + b)
        assert set(torch.nonzero(choice.memory.known).squeeze(-1).tolist()) == set(expected)
    assert expected, "random play reported nothing"
    assert {g: int(choice.memory.first_seen[g]) for g in expected} == expected


# ---------------------------------------------------------------- learning progress
def test_learning_progress_on_a_hand_built_success_history():
    # four goals in three groups: goals 0 and 1 share group 0
    progress = LearningProgress(torch.tensor([0, 0, 1, 2]), num_groups=3, window=4)
    # group 0: 4 failures then 4 successes, from both of its goals: LP 1
    progress.record(torch.tensor([0, 1, 0, 1, 0, 1, 0, 1]), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]))
    # group 1: mastered then forgotten, with older history beyond the window: |1/4 - 3/4| = 0.5
    progress.record(torch.full((10,), 2), torch.tensor([0, 0, 1, 1, 1, 0, 1, 0, 0, 0]))
    # group 2: 3 attempts, halves of 1: the last (1) against the one before (1): 0
    progress.record(torch.full((3,), 3), torch.tensor([0, 1, 1]))
    assert progress.progress().tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert progress.history[1] == [1, 1, 1, 0, 1, 0, 0, 0]  # the last 2 * window outcomes
    assert progress.attempts.tolist() == [8, 10, 3] and progress.successes.tolist() == [4, 4, 2]
    assert progress.recent_success().tolist() == pytest.approx([1.0, 0.25, 2 / 3])
    progress.record(torch.tensor([3]), torch.tensor([0]))  # group 2: [1, 0] against [0, 1]
    assert progress.progress()[2].item() == pytest.approx(abs(0.5 - 0.5))
    assert LearningProgress(torch.tensor([0]), 1, window=3).progress().tolist() == [0.0]  # no attempt


def test_an_episode_that_terminates_without_a_reward_is_a_failed_attempt():
    # an environment may end an episode on a failure (a game lost): its outcome is a rewarded
    # termination, not the termination alone
    _, choice = autotelic_env(num_envs=2)
    choice.neutral[:] = False
    goal = CATALOGUE.id_of("Grasp blue cat")
    ended = torch.ones(2, 1, dtype=torch.bool)
    step = TensorDict(
        {
            "achieved_goal_ids": torch.full((2, 3), -1),
            "achieved_goal_count": torch.zeros(2, dtype=torch.int64),
            "goal_id": torch.full((2,), goal),
            "done": ended,
            "terminated": ended,
            "reward": torch.tensor([[0.0], [1.0]]),
        },
        batch_size=[2],
    )
    choice._step(TensorDict({}, batch_size=[2]), step)
    group = choice.group_of[goal]
    assert choice.progress.attempts[group] == 2 and choice.progress.successes[group] == 1


def test_learning_progress_state_round_trip_and_mismatch():
    progress = LearningProgress(torch.tensor([0, 1]), 2, window=2)
    progress.record(torch.tensor([0, 0, 1]), torch.tensor([1, 0, 1]))
    other = LearningProgress(torch.tensor([0, 1]), 2, window=2)
    other.load_state_dict(progress.state_dict())
    assert other.history == progress.history and torch.equal(other.progress(), progress.progress())
    with pytest.raises(ValueError, match="lp_window"):
        LearningProgress(torch.tensor([0, 1]), 2, window=3).load_state_dict(progress.state_dict())


def test_goal_groups_follow_the_grammar():
    group_of, names = goal_groups(CATALOGUE, "type,category", environment=PLAYGROUND)
    name = lambda goal: names[group_of[CATALOGUE.id_of(goal)]]  # noqa: E731
    assert name("Grasp red cat") == name("Grasp any animal") == "grasp/animal"
    assert name("Grow blue rose") == "grow/plant" and name("Grasp any red thing") == "grasp/any"
    assert name("Grow red cat then grasp blue door") == "grow-then-grasp/furniture"
    group_of, names = goal_groups(CATALOGUE, "colour", environment=PLAYGROUND)
    assert names[group_of[CATALOGUE.id_of("Grasp any blue thing")]] == "blue"
    assert names[group_of[CATALOGUE.id_of("Grasp any cat")]] == "any"
    group_of, names = goal_groups(CATALOGUE, "goal", environment=PLAYGROUND)
    assert len(names) == len(CATALOGUE) and group_of[17] == 17
    for bad in ("type,size", "", "goal,type", "type,type"):
        with pytest.raises(ValueError, match="goal grouping"):
            parse_groups(bad)


# ---------------------------------------------------------------- goal choice
def test_choice_never_leaves_the_candidates():
    candidates = torch.zeros(len(CATALOGUE), dtype=torch.bool)
    candidates[[4, 40, 400]] = True
    gen = torch.Generator().manual_seed(0)
    goals, uniform = choose_goals(candidates, 500, gen)
    assert set(goals.tolist()) == {4, 40, 400} and uniform.all()
    group_of, names = goal_groups(CATALOGUE, "type,category", environment=PLAYGROUND)
    lp = torch.rand(len(names), generator=gen)
    goals, _ = choose_goals(candidates, 500, gen, lp, group_of, epsilon=0.3)
    assert set(goals.tolist()) <= {4, 40, 400}
    with pytest.raises(ValueError, match="empty"):
        choose_goals(torch.zeros(5, dtype=torch.bool), 1, gen)


def test_lp_choice_follows_learning_progress():
    group_of = torch.tensor([0, 0, 1, 2])
    candidates = torch.tensor([True, True, True, True])
    gen = torch.Generator().manual_seed(0)
    lp = torch.tensor([0.0, 0.75, 0.25])
    goals, uniform = choose_goals(candidates, 4000, gen, lp, group_of, epsilon=0.0)
    assert not uniform.any() and not (group_of[goals] == 0).any()  # no progress, no choice
    share = (group_of[goals] == 1).float().mean().item()
    assert share == pytest.approx(0.75, abs=0.03)
    goals, uniform = choose_goals(candidates, 4000, gen, lp, group_of, epsilon=0.5)
    assert uniform.float().mean().item() == pytest.approx(0.5, abs=0.03)
    assert (goals[uniform] <= 1).float().mean().item() == pytest.approx(0.5, abs=0.05)  # uniform over goals
    _, uniform = choose_goals(candidates, 10, gen, torch.zeros(3), group_of, epsilon=0.0)
    assert uniform.all()  # no group has progress yet: uniform


@pytest.mark.parametrize("strategy", ["lp", "uniform"])
def test_episodes_pursue_the_neutral_goal_until_a_report_then_only_discovered_goals(strategy):
    env, choice = autotelic_env(num_envs=8, strategy=strategy, seed=3)
    td = env.reset()
    neutral_objects = set(CATALOGUE.matching_objects("red door"))
    assert (td["goal_id"] == NEUTRAL_ID).all() and choice.neutral.all()
    gen = torch.Generator().manual_seed(2)
    chosen = 0
    for _ in range(120):
        neutral = choice.neutral.clone()
        step, td = env.step_and_maybe_reset(random_actions(td, gen))
        reward = step["next", "reward"].squeeze(-1)
        assert (reward[neutral] == 0).all()  # no event achieves the neutral goal
        for b in torch.nonzero(step["next", "done"].squeeze(-1)).squeeze(-1).tolist():
            goal = int(td["goal_id"][b])
            if choice.neutral[b]:
                assert goal == NEUTRAL_ID and not choice.candidates().any()  # nothing known yet
                names = {OBJECT_NAMES[i] for i in td["objects"][b].tolist()}
                assert not names & neutral_objects
            else:
                assert choice.memory.known[goal], CATALOGUE.goals[goal]  # a discovered goal
                chosen += 1
    assert chosen > 20
    assert not choice.neutral.any()  # once goals are known no episode is neutral


def test_the_neutral_goal_is_chosen_only_while_nothing_is_known():
    _, choice = autotelic_env(num_envs=4)
    goals, scenes = choice.choose(3)
    assert goals == [NEUTRAL_GOAL] * 3 and all(len(s) == choice.num_objects for s in scenes)
    choice.memory.add(torch.tensor([[CATALOGUE.id_of("Grasp blue cat")]]), torch.tensor([1]), 0)
    goals, scenes = choice.choose(50)
    assert set(goals) == {"Grasp blue cat"} and scenes == [None] * 50


def test_goals_that_do_not_fit_the_scenes_are_remembered_but_not_chosen():
    _, choice = autotelic_env(num_envs=4)  # 3 objects: grow-then-grow goals need 4
    too_big = CATALOGUE.id_of("Grow red cat then grow blue rose")
    choice.memory.add(torch.tensor([[too_big, 7]]), torch.tensor([2]), 0)
    assert choice.memory.known[too_big]
    goals, _ = choice.choose(40)
    assert set(goals) == {CATALOGUE.goals[7]}


def test_state_dict_resumes_the_choices_exactly():
    env_a, choice_a = autotelic_env(num_envs=8, seed=5)
    gen = torch.Generator().manual_seed(0)
    td = env_a.reset()
    for _ in range(40):
        _, td = env_a.step_and_maybe_reset(random_actions(td, gen))
    env_b, choice_b = autotelic_env(num_envs=8, seed=99)
    choice_b.load_state_dict(choice_a.state_dict())
    env_b.base_env.load_state_dict(env_a.base_env.state_dict())
    td_b = td.clone()
    gen_b = torch.Generator().manual_seed(7)
    gen_b.set_state(gen.get_state())
    for _ in range(40):
        step_a, td = env_a.step_and_maybe_reset(random_actions(td, gen))
        step_b, td_b = env_b.step_and_maybe_reset(random_actions(td_b, gen_b))
        assert torch.equal(td["goal_id"], td_b["goal_id"]) and torch.equal(td["objects"], td_b["objects"])
    assert torch.equal(choice_a.memory.first_seen, choice_b.memory.first_seen)
    assert choice_a.progress.history == choice_b.progress.history
    assert torch.equal(choice_a.generator.get_state(), choice_b.generator.get_state())
    with pytest.raises(ValueError, match="autotelic"):
        autotelic_env(num_envs=8, strategy="uniform")[1].load_state_dict(choice_a.state_dict())


def test_metrics_report_memory_growth_and_choices():
    env, choice = autotelic_env(num_envs=8, goals="train", task_set="train")
    gen = torch.Generator().manual_seed(0)
    td = env.reset()
    for _ in range(30):
        _, td = env.step_and_maybe_reset(random_actions(td, gen))
    metrics = choice.metrics()
    assert metrics["autotelic/discovered"] == len(choice.memory) > 0
    assert metrics["autotelic/discovered_train_fraction"] == pytest.approx(
        choice.memory.known[torch.as_tensor(CATALOGUE.train_ids)].sum().item() / 8470
    )
    assert metrics["autotelic/discovered_task_fraction"] == metrics["autotelic/discovered_train_fraction"]
    shares = [metrics[f"autotelic/choice/{k}"] for k in ("neutral", "uniform", "lp")]
    assert sum(shares) == pytest.approx(1.0) and shares[0] > 0
    table = choice.group_table()
    assert sum(row["discovered"] for row in table.values()) == len(choice.memory)


def test_bad_settings_name_the_problem():
    with pytest.raises(ValueError, match="strategy"):
        AutotelicGoals(2, 3, strategy="random", environment=PLAYGROUND)
    with pytest.raises(ValueError, match="epsilon"):
        AutotelicGoals(2, 3, epsilon=1.5, environment=PLAYGROUND)
    with pytest.raises(ValueError, match="window"):
        AutotelicGoals(2, 3, window=0, environment=PLAYGROUND)
