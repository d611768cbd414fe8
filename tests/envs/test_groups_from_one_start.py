"""Groups of episodes from one start (issue 87, GRPO-GLAM's groups): ``reset_in_groups`` on every
built-in environment gives each group of consecutive sub-environments the same first state (the
same scene and goal, level and mission, game and quest), the same actions then play the same
episode, TorchRL's spec checks still pass, and an environment without it is refused by name."""

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from tests.training.test_custom_environment import LineText
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.protocol import MissingCapability


@pytest.fixture(scope="module", params=["playground", "babyai", "textworld"])
def environment(request, tmp_path_factory):
    if request.param == "babyai":
        pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    if request.param == "textworld":
        pytest.importorskip("textworld", reason="TextWorld needs the textworld extra")
        from torchrl_glam.envs.textworld import TextWorldText

        return TextWorldText(
            "coin_collector", train_games=4, held_out_games=2, cache=str(tmp_path_factory.mktemp("tw"))
        )
    return get_environment(request.param)


def _groups_equal(environment, td, size: int) -> list[list[str]]:
    prompts, candidates = environment.render(td)
    for b in range(len(prompts)):
        first = b - b % size
        assert prompts[b] == prompts[first] and candidates[b] == candidates[first], (b, prompts[b], prompts[first])
        assert torch.equal(td["action_mask"][b], td["action_mask"][first])
        assert int(td["goal_id"][b]) == int(td["goal_id"][first])
    return prompts


def test_a_group_s_episodes_start_from_one_state_and_play_alike(environment):
    assert environment.has("reset_in_groups")
    env = environment.make_env(6, seed=1, max_steps=8)
    td = environment.reset_in_groups(env, 3)
    _groups_equal(environment, td, 3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):  # each group's leader draws an action, its group takes it
        leaders = torch.multinomial(td["action_mask"][::3].float(), 1, generator=generator).squeeze(-1)
        td["action"] = leaders.repeat_interleave(3)
        step = env.step(td)
        nxt = step["next"]
        for b in range(6):
            first = b - b % 3
            assert nxt["reward"][b].item() == nxt["reward"][first].item()
            assert bool(nxt["done"][b]) == bool(nxt["done"][first])
        if nxt["done"].any():
            break
        _groups_equal(environment, nxt, 3)
        td = nxt
    check_env_specs(env, seed=0)


def test_groups_must_divide_the_sub_environments(environment):
    env = environment.make_env(4, seed=0, max_steps=4)
    with pytest.raises(ValueError, match="groups of 3 episodes do not divide 4 sub-environments"):
        environment.reset_in_groups(env, 3)


def test_an_environment_without_it_is_refused_naming_the_capability():
    line = LineText()
    assert not line.has("reset_in_groups")
    with pytest.raises(MissingCapability, match="has no 'reset_in_groups'.*GRPO-GLAM"):
        line.reset_in_groups(line.make_env(4, seed=0, max_steps=4), 2)
