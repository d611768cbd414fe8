"""SAC-GLAM+HER on BabyAI-Text through the training script, chosen by name (``env=babyai``)."""

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("minigrid")

from torchrl_glam.algorithms.sac_glam.train import main
from torchrl_glam.training.checkpoint import load_checkpoint  # noqa: E402


def test_the_smoke_babyai_preset_trains_and_relabels(tmp_path):
    run_dir = tmp_path / "run"
    code = main(
        [
            "--preset",
            "smoke_babyai",
            "total_steps=80",
            "max_steps=5",
            "learning_starts=16",
            "update_frequency=16",
            "eval_every=80",
            "checkpoint_every=80",
            "log_every=40",
            "eval_episodes=4",
            "loggers=csv",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ]
    )
    assert code == 0
    assert json.loads((run_dir / "config.json").read_text())["env"]["name"] == "babyai"
    evaluation = [json.loads(line) for line in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluation} == {"train", "held_out"}  # held_out: MixedTestLocal
    state = load_checkpoint(Path(run_dir))
    assert state["updater"]["updates"] > 0
    relabeled = (run_dir / "logs" / "scalars" / "batch" / "relabeled_share.csv").read_text().split()[-1]
    assert float(relabeled.split(",")[1]) > 0  # the partner's reports are relabeled with


def test_goal_types_restrict_training_and_evaluation_to_those_task_kinds(tmp_path):
    """``goal_types=goto,pickup``: GoToLocal's and PickupLocal's kinds of mission, in the training
    episodes and in both evaluation sets; a type BabyAI-Text lacks is refused by name."""
    from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
    from torchrl_glam.envs.babyai.text import BabyAIGoalCatalogue
    from torchrl_glam.training.config import ConfigError
    from torchrl_glam.training.factories import make_env, make_eval_envs

    cfg = SACGLAMConfig().replace(env="babyai", goal_types=["goto", "pickup"], num_envs=24, eval_episodes=24).validate()
    catalogue = BabyAIGoalCatalogue.default()
    for env in (make_env(cfg), *make_eval_envs(cfg).values()):
        kinds = {catalogue.type_of(int(g)) for g in env.reset()["goal_id"]}
        assert kinds == {"goto", "pickup"}, kinds
    with pytest.raises(ConfigError, match="goal_types=.*'goto', 'pickup', 'open'"):
        SACGLAMConfig().replace(env="babyai", goal_types=["goto", "fly"]).validate()
    with pytest.raises(ConfigError, match="nor an option of env='playground'"):
        SACGLAMConfig().replace(goal_types=["goto"]).validate()

    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "--preset",
                "smoke_babyai",
                "goal_types=goto,pickup",
                "total_steps=40",
                "max_steps=5",
                "learning_starts=16",
                "update_frequency=16",
                "eval_every=40",
                "eval_episodes=8",
                "loggers=csv",
                "--run-dir",
                str(run_dir),
                "--no-progress",
            ]
        )
        == 0
    )
    evaluation = [json.loads(line) for line in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert {k for e in evaluation for k in e if k.startswith("success/")} <= {"success/goto", "success/pickup"}


def test_history_reaches_the_prompts_the_agent_scores_and_the_replay_buffer(tmp_path):
    """``history=2`` (GLAM's prompt): the config's environment renders the past views, the stored
    compact state holds them, and a run trains; an environment without the option refuses it."""
    from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
    from torchrl_glam.envs.babyai.torchrl_env import MAX_HISTORY
    from torchrl_glam.training.config import ConfigError
    from torchrl_glam.training.factories import make_env, make_glam_agent

    cfg = SACGLAMConfig().replace(env="babyai", history=2, num_envs=2, model=None).validate()
    env, agent = make_env(cfg), make_glam_agent(cfg)
    assert agent.environment is cfg.environment and "past_actions" in cfg.environment.state_keys
    td = env.reset()
    td = env.step(td.set("action", torch.tensor([2, 0])))["next"]
    prompts, _ = agent.environment.render({k: td[k] for k in agent.environment.state_keys})
    assert all(p.count(" \n Observation ") == 2 for p in prompts)  # GLAM's prompt, the default wording
    assert "Action 0: go forward \n Observation 1: " in prompts[0]
    assert "Action 0: turn left \n Observation 1: " in prompts[1]
    readable = SACGLAMConfig().replace(env="babyai", history=2, wording="readable").validate().environment
    prompts, _ = readable.render({k: td[k] for k in readable.state_keys})
    assert "Action: go forward\nObservation: " in prompts[0] and "Action: turn left\nObservation: " in prompts[1]
    with pytest.raises(ConfigError, match="unknown config field 'history'.*nor an option of env='playground'"):
        SACGLAMConfig().replace(history=2).validate()
    too_long = MAX_HISTORY + 1  # the environment's bound is the config's
    with pytest.raises(
        ConfigError,
        match=f"bad config value env.options.history={too_long}: expected an integer from 0 to {MAX_HISTORY} ",
    ):
        SACGLAMConfig().replace(env="babyai", history=too_long).validate()

    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "--preset",
                "smoke_babyai",
                "history=2",
                "total_steps=40",
                "max_steps=5",
                "learning_starts=16",
                "update_frequency=16",
                "eval_every=40",
                "eval_episodes=4",
                "loggers=csv",
                "--run-dir",
                str(run_dir),
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads((run_dir / "config.json").read_text())["env"]["options"]["history"] == 2
    stored = load_checkpoint(Path(run_dir))["replay"]["buffers"][0]
    assert (stored["_storage"]["_storage"]["next.past_actions"] >= 0).any()  # TorchRL storage state: flat keys


def test_a_checkpoint_whose_steps_lack_a_key_of_the_compact_state_is_refused_by_name(tmp_path):
    """A run checkpointed before BabyAI-Text's steps held the room ("objects", for HER's twins)
    does not resume into a crash deep in the episode assembler: the error names the key and the way
    out."""
    from torchrl_glam.training.checkpoint import CheckpointError, save_checkpoint

    run_dir = tmp_path / "run"
    args = [
        "--preset",
        "smoke_babyai",
        "max_steps=7",
        "learning_starts=16",
        "update_frequency=16",
        "eval_every=1000",
        "checkpoint_every=40",
        "loggers=csv",
        "--run-dir",
        str(run_dir),
        "--no-progress",
    ]
    assert main([*args, "total_steps=40"]) == 0
    state = load_checkpoint(Path(run_dir))
    steps = state["assembler"]["steps"]
    assert any(steps)  # episodes in progress at the checkpoint
    state["assembler"]["steps"] = [[step.exclude("objects") for step in env_steps] for env_steps in steps]
    save_checkpoint(state, run_dir)
    with pytest.raises(CheckpointError, match=r"lack \['objects'\].*resume it with those, or start a new --run-dir"):
        main([*args, "total_steps=80", "--resume"])
