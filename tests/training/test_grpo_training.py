"""GRPO-GLAM end to end (issue 87): a group's episodes in the training loop start from one state on
every built-in environment, the example script trains (smoke run, step-level variant with a KL),
resumes exactly from a checkpoint taken mid-group, and its config refuses what cannot run."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from torchrl.envs import TransformedEnv

from tests.envs.test_groups_from_one_start import environment  # noqa: F401  a fixture: every built-in environment
from tests.training.test_custom_environment import line_environment  # noqa: F401  a fixture
from torchrl_glam.algorithms import get_script
from torchrl_glam.algorithms.grpo_glam.config import make_grpo_config
from torchrl_glam.algorithms.grpo_glam.groups import Groups, RepeatedStarts
from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
from torchrl_glam.envs import get_environment
from torchrl_glam.training.checkpoint import read_checkpoint
from torchrl_glam.training.config import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_glam.py"  # run as a user runs it


def run_example(args):
    return get_script("grpo_glam").load().main(["--preset", "smoke", "--no-progress", *args])


def test_a_group_s_episodes_in_the_loop_start_from_one_state(environment):
    """Auto-resets included: each complete group's G episodes begin with the same prompt and
    candidates, and a sub-environment's next group is a new draw."""
    G, num_envs, max_steps = 3, 4, 4
    env = TransformedEnv(
        environment.make_env(num_envs, seed=0, max_steps=max_steps),
        RepeatedStarts(num_envs, G, environment=environment),
    )
    groups = Groups(num_envs, G, max_steps, environment=environment)
    td, generator = env.reset(), torch.Generator().manual_seed(0)
    while len(groups) < 2 * num_envs:
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        td["sample_log_prob"] = torch.zeros(num_envs)
        step, td = env.step_and_maybe_reset(td)
        groups.add(step)
    episodes = groups.take()
    assert episodes.shape == (2 * num_envs * G, max_steps) and not len(groups)
    prompts, candidates = environment.render(episodes[:, 0])
    firsts = [(prompts[i], tuple(candidates[i])) for i in range(len(prompts))]
    for group in range(2 * num_envs):
        members = firsts[group * G : (group + 1) * G]
        assert all(member == members[0] for member in members), members
    assert len({firsts[group * G] for group in range(2 * num_envs)}) > 1  # each group a new draw (4 games here)


def test_an_environment_without_groups_is_refused_by_name(line_environment):
    with pytest.raises(ConfigError, match="reset_in_groups.*env='line' has none"):
        make_grpo_config("smoke", {"env.name": "line", "env.goals": "train", "run.eval_sets": ["train"]})
    with pytest.raises(ConfigError, match="group_size"):
        make_grpo_config("smoke", {"algorithm.group_size": 1})


@pytest.mark.parametrize("preset", ["cpu", "cpu_babyai", "cpu_textworld_coin_collector"])
def test_the_comparison_presets_differ_from_ppo_glams_by_the_advantage_only(preset):
    grpo, ppo = make_grpo_config(preset), make_ppo_config(preset)
    assert grpo.env == ppo.env and grpo.model == ppo.model
    assert dataclasses.replace(grpo.run, run_dir="") == dataclasses.replace(ppo.run, run_dir="")
    for name in ("epochs", "minibatch_size", "lr", "clip_epsilon", "entropy_coeff", "max_grad_norm"):
        assert getattr(grpo.algorithm, name) == getattr(ppo.algorithm, name), name


def test_smoke_run_of_the_step_level_variant_with_a_kl(tmp_path):
    run = tmp_path / "run"
    assert run_example(["--run-dir", str(run), "step_level=true", "kl_coeff=0.01"]) == 0
    config = json.loads((run / "config.json").read_text())["algorithm"]
    assert config["step_level"] and config["kl_coeff"] == 0.01
    scalars = run / "logs" / "scalars"
    for name in ["loss_objective", "loss_entropy", "loss_kl", "kl_to_initial", "clip_fraction", "ratio", "grad_norm"]:
        assert (scalars / f"{name}.csv").exists(), name
    for name in ["update/groups", "update/transitions", "update/equal_return_groups", "eval/held_out/success"]:
        assert (scalars / f"{name}.csv").exists(), name
    kl = [float(row.split(",")[1]) for row in (scalars / "kl_to_initial.csv").read_text().splitlines()]
    assert kl and all(value >= 0 for value in kl) and any(value > 0 for value in kl)  # the policy moved
    evaluations = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluations} == {"train", "held_out"}


def _losses(run: Path) -> list[tuple[float, float]]:
    rows = (run / "logs" / "scalars" / "loss_objective.csv").read_text().splitlines()
    return [tuple(map(float, row.split(","))) for row in rows]


def test_resume_gives_the_same_next_losses_as_an_uninterrupted_run(tmp_path):
    common = ["log_every=16", "eval_every=96", "checkpoint_every=96"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert run_example([*common, "--run-dir", str(straight), "total_steps=384"]) == 0
    assert run_example([*common, "--run-dir", str(resumed), "total_steps=96"]) == 0
    state = read_checkpoint(resumed / "checkpoint.pt")
    assert any(state["groups"]["in_progress"]) and state["starts"]["played"].any()  # mid-group
    assert run_example([*common, "--run-dir", str(resumed), "total_steps=384", "--resume"]) == 0
    a, b = _losses(straight), _losses(resumed)
    assert len(a) == len(b) and any(step > 96 for step, _ in a)
    for (step_a, loss_a), (step_b, loss_b) in zip(a, b, strict=True):
        assert step_a == step_b and loss_a == pytest.approx(loss_b, rel=1e-5, abs=1e-7)
    final = [read_checkpoint(run / "checkpoint.pt") for run in (straight, resumed)]
    for key, value in final[0]["loss"].items():
        assert torch.allclose(value, final[1]["loss"][key], atol=1e-6), key


def test_an_environment_without_restart_as_is_refused_by_name():
    playground = get_environment("playground")
    base = playground.make_env(2, seed=0, max_steps=2)
    base.restart_as = None  # as an environment that declares reset_in_groups but lacks restart_as
    env = TransformedEnv(base, RepeatedStarts(2, 2, environment=playground))
    td = env.reset()
    td["action"] = td["action_mask"].long().argmax(-1)
    with pytest.raises(TypeError, match="has no restart_as"):
        for _ in range(2):
            _, td = env.step_and_maybe_reset(td)


@pytest.mark.slow
def test_data_parallel_ranks_hold_identical_weights_after_updates(tmp_path):
    """Two processes over gloo: each rank's groups complete at their own pace, and both update
    together (once every rank holds its share of the groups) with the same gradient steps."""
    from data_parallel import run_ranks

    run = tmp_path / "ddp"
    args = ["--preset", "smoke", "--no-progress", "--run-dir", str(run), "total_steps=384", "checkpoint_every=384"]
    run_ranks(EXAMPLE, [*args, "eval_every=384"], timeout=600)
    states = [read_checkpoint(run / sub / "checkpoint.pt") for sub in ("", "rank1")]
    assert states[0]["updater"]["updates"] == states[1]["updater"]["updates"] > 0
    for key, value in states[0]["loss"].items():
        assert torch.equal(value, states[1]["loss"][key]), key
    assert (states[0]["env"]["rules"]["objects"] != states[1]["env"]["rules"]["objects"]).any()
