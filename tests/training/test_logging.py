"""What the run logger computes from finished episodes."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.training.logging import RunLogger

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def log_one_episode(tmp_path, actions):
    """Plays ``actions`` (the whole episode: its length is the time limit) for the goal "Grow red
    cat" in a fixed scene, logs the finished episode and flushes; returns ``last(name)``, the
    logged value of ``train/<name>``."""
    env = PlaygroundTextEnv(num_envs=1, goals="train", max_steps=len(actions), seed=0, text=False)
    td = env.reset(
        TensorDict(
            {
                "goal": ["Grow red cat"],
                "scene": [["red cat", "blue water", "green table", "red rose", "blue lion", "red food"]],
            },
            batch_size=[1],
        )
    )
    assembler = EpisodeAssembler(num_envs=1, max_steps=len(actions), environment=PLAYGROUND)
    for action in actions:  # scene slots 0-5 "Go to", 6 "Grasp", 7 "Release"
        step, td = env.step_and_maybe_reset(td.set("action", torch.tensor([action])))
        episodes = assembler.add(step)
    logger = RunLogger(make_config("smoke", {"run_dir": str(tmp_path), "loggers": ["csv"]}))
    logger.episodes(episodes)
    logger.flush(len(actions), 1.0)
    scalars = tmp_path / "logs" / "scalars" / "train"
    return lambda name: float((scalars / f"{name}.csv").read_text().split()[-1].split(",")[1])


def test_the_share_of_go_to_the_object_the_agent_stands_on_is_logged(tmp_path):
    # go to the cat, again (a repeat), to the table, again (a repeat): truncated after 4 steps
    last = log_one_episode(tmp_path, (0, 0, 2, 2))
    assert last("repeat_go_to_share") == pytest.approx(2 / 4)


def test_the_share_of_steps_that_change_nothing_and_of_each_kind_of_action_is_logged(tmp_path):
    """What a collapsed policy does shows in these shares (experiments/cpu_full, "Collapses")."""
    # go to the cat, again (no change), grasp it, release it, release again (nothing held: no change)
    last = log_one_episode(tmp_path, (0, 0, 6, 7, 7))
    assert last("no_op_share") == pytest.approx(2 / 5)
    assert last("action_share/go_to") == pytest.approx(2 / 5)
    assert last("action_share/grasp") == pytest.approx(1 / 5)
    assert last("action_share/release") == pytest.approx(2 / 5)
