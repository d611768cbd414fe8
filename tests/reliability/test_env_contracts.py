"""Issue 12, defects 5 and 6: the environment keeps nn.Module's and TorchRL's contracts (state_dict
arguments, so ParallelEnv / SerialEnv of it work), and random rollouts through TorchRL's wrappers
respect the action mask with the ActionMask() idiom the error names."""

import functools

import pytest
import torch
from torchrl.envs import Compose, ParallelEnv, SerialEnv, TransformedEnv
from torchrl.envs.transforms import ActionMask, RewardSum, StepCounter
from torchrl.envs.utils import check_env_specs

from torchrl_glam.envs.playground import PlaygroundTextEnv


def make_env(seed=0, num_envs=3, text=False):
    return PlaygroundTextEnv(num_envs=num_envs, goals="simplified", seed=seed, text=text)


def test_state_dict_accepts_nn_module_arguments_and_round_trips():
    env = make_env()
    td = env.reset()
    for _ in range(3):
        td.set("action", torch.multinomial(td["action_mask"].float(), 1).squeeze(-1))
        td = env.step(td)["next"]
    state = env.state_dict(prefix="", keep_vars=False)
    other = make_env(seed=5)
    other.reset()
    other.load_state_dict(state, strict=True)
    assert torch.equal(other.observation()["objects"], env.observation()["objects"])
    assert torch.equal(other.observation()["action_mask"], env.observation()["action_mask"])
    with pytest.raises(KeyError, match="state_dict"):
        other.load_state_dict({}, strict=True)


def test_serial_env_of_the_env_rolls_out():
    env = SerialEnv(2, functools.partial(make_env, 0))
    try:
        td = TransformedEnv(env, ActionMask()).rollout(5)
        assert td.batch_size[:2] == torch.Size([2, 3])
    finally:
        env.close()


@pytest.mark.slow
def test_parallel_env_of_a_lambda_rolls_out():
    # a lambda is wrapped in TorchRL's EnvCreator, which calls load_state_dict(..., strict=False)
    env = ParallelEnv(2, lambda: PlaygroundTextEnv(num_envs=3, goals="simplified", seed=0))
    try:
        td = TransformedEnv(env, ActionMask()).rollout(5)
        assert td.batch_size[:2] == torch.Size([2, 3]) and "prompt" in td.keys()
    finally:
        env.close()


@pytest.mark.parametrize("seed", range(10))
def test_random_rollouts_through_transformed_env_respect_the_mask(seed):
    torch.manual_seed(seed)
    env = TransformedEnv(make_env(seed, num_envs=8), Compose(RewardSum(), ActionMask()))
    td = env.rollout(30, break_when_any_done=False)
    taken = td["action"]
    assert td["action_mask"].gather(-1, taken.unsqueeze(-1)).all()


def test_check_env_specs_through_a_transform():
    for seed in range(5):
        torch.manual_seed(seed)
        check_env_specs(TransformedEnv(make_env(seed, num_envs=8), Compose(StepCounter(), ActionMask())))


def test_without_action_mask_the_error_names_the_idiom():
    torch.manual_seed(0)
    env = TransformedEnv(make_env(0, num_envs=8), RewardSum())
    with pytest.raises(ValueError, match=r"ActionMask\(\)"):
        for seed in range(10):
            torch.manual_seed(seed)
            env.rollout(30, break_when_any_done=False)
