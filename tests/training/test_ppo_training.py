"""PPO-GLAM end to end: the updater's first-epoch ratios (1 without HER; App. G's ratio with HER),
the example script (smoke run, exact resume, a NaN stop)."""

import json
from pathlib import Path

import pytest
import torch
from torchrl.modules import MaskedCategorical

from torchrl_glam.algorithms import get_script
from torchrl_glam.algorithms.ppo_glam import update as ppo_update
from torchrl_glam.algorithms.ppo_glam.build import make_loss
from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
from torchrl_glam.algorithms.ppo_glam.rollout import Rollout
from torchrl_glam.algorithms.ppo_glam.update import PPOGLAMUpdater
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import action_mask_from_held, render_batch
from torchrl_glam.modules import MASKED_LOGIT
from torchrl_glam.training.checkpoint import read_checkpoint
from torchrl_glam.training.factories import act, make_env

PLAYGROUND = get_environment("playground")  # the environment object the library takes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ppo_glam.py"  # run as a user runs it


def load_example():
    """The training script the example runs (found by import name, as the launcher finds it)."""
    return get_script("ppo_glam").load()


def collect(agent, cfg, seed=0):
    """One rollout [num_envs, rollout_steps], collected as the example script does."""
    env = make_env(cfg, seed=seed)
    rollout, td = Rollout(cfg.algorithm.rollout_steps, environment=PLAYGROUND), env.reset()
    torch.manual_seed(seed)
    while True:
        act(agent, td, with_log_prob=True)
        step, td = env.step_and_maybe_reset(td)
        full = rollout.add(step)
        if full is not None:
            return full


def test_first_epoch_ratio_is_one_through_the_updater():
    cfg = make_ppo_config("smoke")
    torch.manual_seed(0)
    agent = make_loss(cfg)
    data = collect(agent, cfg)
    before = {name: [p.detach().clone() for p in group] for name, group in agent.param_groups().items()}
    metrics = PPOGLAMUpdater(agent, cfg).update(data)
    steps_per_epoch = len(metrics) // cfg.algorithm.epochs
    assert len(metrics) == cfg.algorithm.epochs * steps_per_epoch and steps_per_epoch == 2
    assert metrics[0]["ratio/first_epoch"] == pytest.approx(1.0, abs=1e-5)  # the collecting policy is scored
    assert metrics[0]["clip_fraction"] == 0.0 and metrics[0]["update/relabeled_share"] == 0.0
    assert metrics[1]["ratio/first_epoch"] == pytest.approx(1.0, abs=2e-2)  # moved by the first step only
    assert metrics[1]["ratio"] != metrics[0]["ratio"]
    assert all("ratio/first_epoch" not in m for m in metrics[steps_per_epoch:])
    after = agent.param_groups()
    assert all(
        not torch.equal(a, b) for a, b in zip(before["heads"][-2:], after["heads"][-2:])
    )  # the value head learns
    assert any(not torch.equal(a, b) for a, b in zip(before["llm"], after["llm"]))  # the LLM learns


def test_value_clipping_centres_on_the_collecting_policys_values_with_her():
    cfg = make_ppo_config("smoke", {"her": True, "clip_value": 0.2, "epochs": 2})
    torch.manual_seed(0)
    agent = make_loss(cfg)
    metrics = PPOGLAMUpdater(agent, cfg).update(collect(agent, cfg))
    assert metrics[0]["update/relabeled_share"] > 0
    # V_old (collected and relabeled alike) is the value of the policy that collected: nothing clipped at the first step
    assert metrics[0]["value_clip_fraction"] == 0.0 and all("value_clip_fraction" in m for m in metrics)


def independent_log_prob(agent, batch, goal_ids):
    """log pi(a | s, g) for the given goals, scored from freshly rendered prompts."""
    prompts, actions = render_batch(goal_ids, batch["objects"], batch["agent_on"], batch["held"], batch["grown"])
    mask = action_mask_from_held(batch["held"], batch["objects"].shape[-1] + 2)
    with torch.no_grad():
        scores = agent.scorer(prompts, actions, mask)[0]
    return MaskedCategorical(logits=scores, mask=mask, neg_inf=MASKED_LOGIT).log_prob(batch["action"])


@pytest.mark.parametrize("loss", ["clip", "kl"])
def test_her_first_epoch_ratio_is_relabeled_over_original_goal(monkeypatch, loss):
    """App. G: r = pi_theta(a | s, g') / pi_old(a | s, g), g' relabeled and g the collected goal."""
    cfg = make_ppo_config("smoke", {"her": True, "ppo_loss": loss, "her_ratio": 0.9})
    torch.manual_seed(0)
    agent = make_loss(cfg)
    rollout = collect(agent, cfg)
    # trace each transition's collected goal through the updater's own relabeling
    rollout["original_goal_id"] = rollout["goal_id"].clone()
    monkeypatch.setattr(ppo_update, "UPDATE_KEYS", ppo_update.UPDATE_KEYS + ("original_goal_id",))
    data = PPOGLAMUpdater(agent, cfg).update_data(rollout)
    relabeled = data[data["relabeled"]]
    assert len(relabeled) and (relabeled["goal_id"] != relabeled["original_goal_id"]).all()
    out = agent(relabeled)  # the first epoch: nothing trained yet
    expected = independent_log_prob(agent, relabeled, relabeled["goal_id"]) - independent_log_prob(
        agent, relabeled, relabeled["original_goal_id"]
    )
    assert expected.abs().max() > 1e-3  # the goal matters: the ratio is not 1
    torch.testing.assert_close(out["log_ratio"], expected, atol=1e-4, rtol=0)
    collected = data[~data["relabeled"]]
    assert agent(collected)["ratio"].item() == pytest.approx(1.0, abs=1e-5)


def run_example(args):
    return load_example().main(["--preset", "smoke", "--no-progress", *args])


def test_smoke_run_of_the_example(tmp_path):
    run = tmp_path / "run"
    assert run_example(["--run-dir", str(run), "her=true", "her_filter=aligned"]) == 0
    assert (run / "checkpoint.pt").exists() and json.loads((run / "config.json").read_text())["hindsight"]["her"]
    scalars = run / "logs" / "scalars"
    for name in [
        "loss_objective",
        "loss_critic",
        "loss_entropy",
        "entropy",
        "clip_fraction",
        "kl_approx",
        "ratio",
        "ratio/first_epoch",
        "ratio/first_epoch_collected",
        "ratio/first_epoch_relabeled",
        "grad_norm",
        "update/relabeled_share",
        "train/success",
        "time/wall_seconds",
        "eval/train/success",
        "eval/held_out/success",
    ]:
        assert (scalars / f"{name}.csv").exists(), name
    first_epoch = [ratio for _, ratio in _scalar(run, "ratio/first_epoch_collected")]
    assert first_epoch and all(abs(r - 1) < 2e-2 for r in first_epoch)
    evaluations = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluations} == {"train", "held_out"}


def _scalar(run, name):
    """(environment steps, value) rows of a logged scalar."""
    rows = (run / "logs" / "scalars" / f"{name}.csv").read_text().splitlines()
    return [tuple(map(float, row.split(","))) for row in rows]


def _losses(run):
    return [row for name in ("loss_objective", "loss_critic", "ratio/first_epoch") for row in _scalar(run, name)]


@pytest.mark.parametrize("variant", [[], ["her=true", "ppo_loss=kl"]])
def test_resume_gives_the_same_next_losses_as_an_uninterrupted_run(tmp_path, variant):
    # checkpoints at 96 steps fall mid-rollout (rollouts of 8 x 16 = 128): the partial rollout resumes
    common = [*variant, "log_every=32", "eval_every=96", "checkpoint_every=96"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert run_example([*common, "--run-dir", str(straight), "total_steps=384"]) == 0
    assert run_example([*common, "--run-dir", str(resumed), "total_steps=96"]) == 0
    state = read_checkpoint(resumed / "checkpoint.pt")
    assert len(state["rollout"]["steps"]) == 96 // 8 and state["updater"]["updates"] == 0
    assert run_example([*common, "--run-dir", str(resumed), "total_steps=384", "--resume"]) == 0
    a, b = _losses(straight), _losses(resumed)
    assert len(a) == len(b) and any(step > 256 for step, _ in a)
    for (step_a, loss_a), (step_b, loss_b) in zip(a, b):
        assert step_a == step_b and loss_a == pytest.approx(loss_b, rel=1e-5, abs=1e-7)
    final = [read_checkpoint(run / "checkpoint.pt") for run in (straight, resumed)]
    for key, value in final[0]["loss"].items():
        assert torch.allclose(value, final[1]["loss"][key], atol=1e-6), key


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss

    forward, calls = PPOGLAMLoss.forward, {"n": 0}

    def poisoned(self, minibatch):
        out = forward(self, minibatch)
        calls["n"] += 1
        if calls["n"] > 4:  # the second update
            out["loss_critic"] = out["loss_critic"] * float("nan")
        return out

    monkeypatch.setattr(PPOGLAMLoss, "forward", poisoned)
    run = tmp_path / "run"
    assert run_example(["--run-dir", str(run), "checkpoint_every=128", "eval_every=1000"]) == 1
    assert "non-finite loss" in capsys.readouterr().err
    saved = read_checkpoint(run / "checkpoint.pt")
    assert saved["updater"]["updates"] == 4
    assert all(torch.isfinite(v).all() for v in saved["loss"].values() if v.is_floating_point())


@pytest.mark.slow
def test_data_parallel_ranks_hold_identical_weights_after_updates(tmp_path):
    """Two processes over gloo; with HER each rank relabels a different number of transitions, and
    both still take the same number of gradient steps."""
    from data_parallel import run_ranks

    run = tmp_path / "ddp"
    args = [
        "--preset",
        "smoke",
        "--no-progress",
        "--run-dir",
        str(run),
        "total_steps=256",
        "eval_every=256",
        "checkpoint_every=256",
        "her=true",
    ]
    run_ranks(EXAMPLE, args, timeout=600)
    states = [read_checkpoint(run / sub / "checkpoint.pt") for sub in ("", "rank1")]
    assert states[0]["updater"]["updates"] == states[1]["updater"]["updates"] > 0
    for key, value in states[0]["loss"].items():
        assert torch.equal(value, states[1]["loss"][key]), key
    assert (states[0]["env"]["rules"]["objects"] != states[1]["env"]["rules"]["objects"]).any()
