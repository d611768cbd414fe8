"""A new algorithm declares on its config class what the run harness needs of it (issue 74): a
toy algorithm, defined here, with its own learning rate ``policy_lr`` is resumed exactly, and a
resume may change that rate as it may change SAC-GLAM's ``actor_lr`` (before the declarations the
harness knew only ``actor_lr``, ``critic_lr``, ``alpha_lr`` and ``lr``: a resume changing
``policy_lr`` was refused, and one keeping it could not set it)."""

import json
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
import torch

from torchrl_glam.training.cli import RunOptions
from torchrl_glam.training.config import EnvConfig, GLAMConfig, RunConfig
from torchrl_glam.training.run import TrainingRun


@dataclass
class ToyAlgorithmConfig:
    policy_lr: float = 0.1  # the toy's only rate, named as no library algorithm names one
    width: int = 4  # not a rate: a resume may not change it
    gamma: float = 0.9


@dataclass
class ToyConfig(GLAMConfig):
    ALGORITHM: ClassVar[str] = "toy"
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ("algorithm.policy_lr",)
    DISCOUNT_FIELD: ClassVar[str] = "algorithm.gamma"

    algorithm: ToyAlgorithmConfig = field(default_factory=ToyAlgorithmConfig)


@dataclass
class ForgetfulToyConfig(ToyConfig):
    LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ()


def toy_config(run_dir, total_steps, config_class=ToyConfig, **algorithm) -> ToyConfig:
    return config_class(
        env=EnvConfig(goals="simplified", num_envs=4, max_steps=4),
        run=RunConfig(
            run_dir=str(run_dir),
            total_steps=total_steps,
            eval_every=1000,
            eval_episodes=4,
            eval_sets=["train"],
            log_every=8,
            checkpoint_every=16,
            loggers=["csv"],
        ),
        algorithm=ToyAlgorithmConfig(**algorithm),
    )


def train_toy(cfg: ToyConfig, resume: bool = False, rate_field: str = "algorithm.policy_lr") -> torch.nn.Module:
    """The toy's training script: a linear 'policy' stepped by SGD at ``policy_lr`` after every
    environment step, on a target that depends on the step count (so a wrong rate shows)."""
    run = TrainingRun(cfg, RunOptions(resume=resume, progress=False))
    policy = torch.nn.Linear(cfg.algorithm.width, 1)
    optimizer = torch.optim.SGD(policy.parameters(), lr=cfg.algorithm.policy_lr)
    td = run.start({"policy": policy, "optimizer": optimizer}, optimizers={rate_field: optimizer})
    with run:
        while run.running():
            td["action"] = torch.zeros(td["action_mask"].shape[:-1], dtype=torch.long)
            _, td, _ = run.step(td)
            target = torch.tensor([float(run.steps % 7)])
            loss = (policy(torch.ones(cfg.algorithm.width)) - target).pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.log_update({"loss": loss.item()})
            run.end_iteration()
    assert run.finish("toy") == 0
    return policy


def saved_rates(run_dir) -> set[float]:
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    return {group["lr"] for group in state["optimizer"]["param_groups"]}


def test_a_toy_algorithm_is_resumed_exactly_and_a_resume_may_change_its_declared_rate(tmp_path):
    torch.manual_seed(0)
    straight = train_toy(toy_config(tmp_path / "straight", 32))
    train_toy(toy_config(tmp_path / "resumed", 16))
    resumed = train_toy(toy_config(tmp_path / "resumed", 32), resume=True)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a, b)  # the same weights as the run that never stopped

    # the declared rate may change on --resume: set on its optimiser, recorded, config.json rewritten
    changed = train_toy(toy_config(tmp_path / "resumed", 48, policy_lr=0.01), resume=True)
    assert saved_rates(tmp_path / "resumed") == {0.01}
    assert not all(torch.equal(a, b) for a, b in zip(changed.parameters(), resumed.parameters()))
    event = [json.loads(line) for line in (tmp_path / "resumed" / "events.jsonl").read_text().splitlines()][-1]
    assert event["changed"]["algorithm.policy_lr"] == {"saved": 0.1, "now": 0.01}
    assert json.loads((tmp_path / "resumed" / "config.json").read_text())["algorithm"]["policy_lr"] == 0.01
    # a field that is not a rate may not change
    with pytest.raises(ValueError, match=r"algorithm.width: saved 4, now 8"):
        train_toy(toy_config(tmp_path / "resumed", 64, policy_lr=0.01, width=8), resume=True)


def test_optimisers_must_match_the_declared_rates(tmp_path):
    with pytest.raises(ValueError, match=r"LEARNING_RATE_FIELDS \(algorithm.policy_lr\).*undeclared algorithm.width"):
        train_toy(toy_config(tmp_path / "run", 16), rate_field="algorithm.width")
    with pytest.raises(ValueError, match=r"undeclared algorithm.policy_lr"):  # a config that forgot its rate
        train_toy(toy_config(tmp_path / "run2", 16, config_class=ForgetfulToyConfig))
