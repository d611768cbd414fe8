"""The evaluation sets a run logs: which goals each one samples, and a sampled evaluation that
repeats itself and leaves the training's random stream alone."""

import pytest
import torch

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs.playground import GOAL_TYPES
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import make_env, make_eval_envs

ALL_SETS = ["train", "held_out", "train_distribution", "train_sampled"]


def evaluation_goals(env) -> torch.Tensor:
    """The goals of the episodes :func:`evaluate` runs in ``env``."""
    env.set_seed(env.seed_value)
    return env.reset()["goal_id"]


def goal_type_shares(env) -> torch.Tensor:
    types = torch.as_tensor(env.catalogue.goal_type[evaluation_goals(env).numpy()])
    return torch.bincount(types, minlength=len(GOAL_TYPES)).float() / env.num_envs


def test_train_weighs_goal_types_equally_and_train_distribution_samples_as_training():
    envs = make_eval_envs(make_config("cpu", {"goals": "train", "eval_sets": ALL_SETS, "eval_episodes": 512}))
    assert list(envs) == ALL_SETS
    by_type, as_training = goal_type_shares(envs["train"]), goal_type_shares(envs["train_distribution"])
    assert by_type.min() > 0.18 and by_type.max() < 0.32  # ~1/4 each
    sequential = GOAL_TYPES.index("grow-then-grasp"), GOAL_TYPES.index("grow-then-grow")
    assert as_training[list(sequential)].sum() > 0.95  # 97.85% of the training goals
    # "train_sampled" runs exactly "train"'s episodes, so greedy and sampled compare pair by pair
    assert torch.equal(evaluation_goals(envs["train"]), evaluation_goals(envs["train_sampled"]))


def test_training_can_draw_goal_types_equally_often_and_the_evaluation_sets_keep_their_draws():
    cfg = make_config(
        "cpu",
        {"goals": "train", "eval_sets": ALL_SETS, "eval_episodes": 512, "num_envs": 512, "goal_sampling": "by_type"},
    )
    train_env = make_env(cfg)
    train_env.set_seed(0)
    types = (
        torch.bincount(
            torch.as_tensor(train_env.catalogue.goal_type[train_env.reset()["goal_id"].numpy()]),
            minlength=len(GOAL_TYPES),
        )
        / 512
    )
    assert types.min() > 0.18 and types.max() < 0.32
    as_training = goal_type_shares(make_eval_envs(cfg)["train_distribution"])  # the paper's measure still
    assert as_training[[GOAL_TYPES.index("grow-then-grasp"), GOAL_TYPES.index("grow-then-grow")]].sum() > 0.95
    with pytest.raises(ValueError, match="bad config value env.goal_sampling='types'"):
        make_config("cpu", {"goal_sampling": "types"})


def random_legal_policy(td, greedy: bool):
    """The first legal action (greedy) or a uniform draw among the legal ones (torch's global stream)."""
    mask = td["action_mask"].float()
    td.set("action", mask.argmax(-1) if greedy else torch.multinomial(mask, 1).squeeze(-1))
    return td


def test_a_sampled_evaluation_repeats_and_leaves_the_training_random_stream_untouched():
    env = make_eval_envs(make_config("cpu", {"goals": "train", "eval_episodes": 64}))["train"]
    torch.manual_seed(0)
    before = torch.get_rng_state()
    first = evaluate(random_legal_policy, env, greedy=False, goal_types=GOAL_TYPES)
    assert torch.equal(torch.get_rng_state(), before)
    assert evaluate(random_legal_policy, env, greedy=False, goal_types=GOAL_TYPES) == first
    assert evaluate(random_legal_policy, env, greedy=True, goal_types=GOAL_TYPES) != first  # it did sample


def test_a_bad_evaluation_set_is_named():
    with pytest.raises(ValueError, match="eval_sets.*train_distribution"):
        make_config("cpu", {"eval_sets": ["train", "train_distrib"]})


def scored_random_policy(td, greedy: bool):
    """Random scores over the candidates, the masked argmax as the action: a policy that writes
    "action_scores" as the agent's does for transcripts."""
    scores = torch.randn(td["action_mask"].shape, generator=torch.Generator().manual_seed(td["goal_id"].sum().item()))
    td.set("action_scores", scores)
    td.set("action", scores.masked_fill(~td["action_mask"], float("-inf")).argmax(-1))
    return td


@pytest.mark.parametrize("environment", ["playground", "babyai"])
def test_an_evaluation_records_a_few_episodes_as_text_in_any_environment(environment):
    # issue 70: the report shows what the agent does; the recording reads only the environment protocol
    if environment == "babyai":
        pytest.importorskip("minigrid")
    preset = "smoke" if environment == "playground" else "smoke_babyai"
    cfg = make_config(preset, {"eval_episodes": 8})
    env = make_eval_envs(cfg)["train"]
    transcripts = []
    results = evaluate(
        scored_random_policy,
        env,
        goal_types=cfg.environment.goal_types,
        transcripts=transcripts,
        environment=cfg.environment,
        num_transcripts=3,
    )
    assert evaluate(scored_random_policy, env, goal_types=cfg.environment.goal_types) == results  # unchanged
    assert len(transcripts) == 3
    goals = evaluation_goals(env)[:3].tolist()
    assert [episode["goal"] for episode in transcripts] == [env.catalogue.goals[g] for g in goals]
    for episode in transcripts:
        assert 1 <= len(episode["steps"]) <= env.max_steps and isinstance(episode["success"], bool)
        for step in episode["steps"]:
            assert step["saw"] and step["action"] == step["candidates"][0][0]  # the argmax: the most probable
            probabilities = [p for _, p in step["candidates"]]
            assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1.001
            assert isinstance(step["reward"], float) and isinstance(step["reported"], list)
    # a success is reported by the partner in the episode's last step
    for episode in transcripts:
        if episode["success"]:
            assert episode["goal"] in episode["steps"][-1]["reported"]
