"""Data parallel: each of N ranks gets 1/N of the environments and of every batch, the SAC and PPO
scripts and updaters alike (a world of 2 faked in one process: the collectives then do nothing)."""

import pytest

from torchrl_glam.algorithms import get_script
from torchrl_glam.algorithms.ppo_glam.build import make_loss as make_ppo_loss
from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
from torchrl_glam.algorithms.ppo_glam.update import PPOGLAMUpdater
from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.algorithms.sac_glam.update import SACGLAMUpdater
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.training import run as run_module


@pytest.fixture
def world_of_two(monkeypatch):
    """Rank 0 of 2; returns the TrainingRun the script builds."""
    monkeypatch.setattr(run_module, "init_distributed", lambda device="cpu": (0, 2))
    runs, start = [], run_module.TrainingRun.start

    def recorded_start(self, *args, **kwargs):
        runs.append(self)
        return start(self, *args, **kwargs)

    monkeypatch.setattr(run_module.TrainingRun, "start", recorded_start)
    return runs


def run_smoke(script: str, run_dir, *overrides: str) -> int:
    """``script``'s smoke preset, 128 steps, no evaluation before the end."""
    argv = ["--preset", "smoke", "--run-dir", str(run_dir), "--no-progress", "total_steps=128", "eval_every=1000"]
    return get_script(script).load().main([*argv, *overrides])


def recorded_sizes(monkeypatch, owner: type, method: str, size) -> list[int]:
    """Records ``size(argument)`` of every call of ``owner.method(argument)``."""
    sizes, original = [], getattr(owner, method)

    def recorded(self, argument):
        sizes.append(size(argument))
        return original(self, argument)

    monkeypatch.setattr(owner, method, recorded)
    return sizes


def test_updaters_take_their_ranks_share_of_every_batch():
    cfg = make_config("smoke", {"batch_size": 32})
    assert SACGLAMUpdater(make_loss(cfg, num_actions=5), None, cfg, world=2).batch_size == 16
    assert SACGLAMUpdater(make_loss(cfg, num_actions=5), None, cfg).batch_size == 32
    ppo_cfg = make_ppo_config("smoke", {"minibatch_size": 64})
    assert PPOGLAMUpdater(make_ppo_loss(ppo_cfg), ppo_cfg, world=2).minibatch_size == 32


@pytest.mark.slow
def test_sac_script_samples_half_batches_in_a_world_of_two(tmp_path, world_of_two, monkeypatch):
    sizes = recorded_sizes(monkeypatch, GoalReplay, "sample", int)  # its batch size
    code = run_smoke("sac_glam", tmp_path / "run", "learning_starts=64", "batch_size=32")
    assert code == 0
    (run,) = world_of_two
    assert run.env.num_envs == 4 and run.per_rank("learning_starts") == 32
    assert sizes and set(sizes) == {16}


@pytest.mark.slow
def test_ppo_script_takes_half_minibatches_in_a_world_of_two(tmp_path, world_of_two, monkeypatch):
    sizes = recorded_sizes(monkeypatch, PPOGLAMLoss, "forward", lambda minibatch: minibatch.numel())
    # a rank's rollout: 4 environments x 16 steps = 64 transitions, in minibatches of 64 / 2
    code = run_smoke("ppo_glam", tmp_path / "run", "minibatch_size=64")
    assert code == 0
    (run,) = world_of_two
    assert run.env.num_envs == 4
    assert sizes and set(sizes) == {32}
