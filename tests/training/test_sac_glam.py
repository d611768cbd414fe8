"""SAC-GLAM's training pieces end to end: the critic warm-up and target updates of the updater, the
example script (smoke run, exact resume, a NaN stop), LoRA checkpoints. The loss's own tests are in
tests/objectives/."""

import json
import math

import pytest
import torch

from torchrl_glam.algorithms import get_script
from torchrl_glam.algorithms.sac_glam.build import load_trained_loss, make_episode_processing, make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.algorithms.sac_glam.update import SACGLAMUpdater
from torchrl_glam.envs import get_environment
from torchrl_glam.training.checkpoint import load_checkpoint, read_checkpoint

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def load_example():
    """The training script the example runs (found by import name, as the launcher finds it)."""
    return get_script("sac_glam").load()


def test_critic_warmup_leaves_the_actor_untouched(filled_replay):
    cfg = make_config("smoke", {"warmup_updates": 2, "batch_size": 16})
    agent = make_loss(cfg, num_actions=5)
    updater = SACGLAMUpdater(agent, filled_replay, cfg)
    llm = [p.detach().clone() for p in agent.llm_parameters()]
    heads = [p.detach().clone() for p in agent.head_parameters()]
    alpha = agent.sac.log_alpha.detach().clone()
    for _ in range(2):
        assert updater.step()["warmup"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(llm, agent.llm_parameters()))
    assert torch.equal(alpha, agent.sac.log_alpha)
    assert any(not torch.equal(a, b) for a, b in zip(heads, agent.head_parameters()))
    assert updater.step()["warmup"] == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(llm, agent.llm_parameters()))


def test_critic_llm_lr_moves_the_llm_by_the_critics_gradient_at_its_own_rate(filled_replay):
    # Adam's first step moves every weight with a gradient by ~lr: with the actor's rate ~0, the
    # LLM moves by critic_llm_lr only when the critic's gradient gets its own optimiser
    def largest_llm_change(**overrides):
        torch.manual_seed(0)
        cfg = make_config("smoke", {"batch_size": 16, "warmup_updates": 0, "actor_lr": 1e-9, **overrides})
        agent = make_loss(cfg, num_actions=5)
        before = [p.detach().clone() for p in agent.llm_parameters()]
        SACGLAMUpdater(agent, filled_replay, cfg).step()
        return max(float((p.detach() - b).abs().max()) for p, b in zip(agent.llm_parameters(), before))

    assert largest_llm_change() < 1e-8
    assert largest_llm_change(critic_llm_lr=1e-3) == pytest.approx(1e-3, rel=0.05)
    with pytest.raises(ValueError, match="critic_llm_lr.*critic_backprop=true"):
        make_config("smoke", {"critic_llm_lr": 1e-3, "critic_backprop": False})


def test_actor_lr_decay_scales_the_llms_rates_from_its_step_on(filled_replay):
    # Adam's first step moves every weight with a gradient by ~lr: before actor_lr_decay_at
    # environment steps the LLM moves by actor_lr, from it on by actor_lr * actor_lr_decay; the
    # critic's own LLM rate follows, the heads' does not
    def largest_changes(env_steps, **overrides):
        torch.manual_seed(0)
        cfg = make_config(
            "smoke",
            {
                "batch_size": 16,
                "warmup_updates": 0,
                "actor_lr": 1e-3,
                "critic_lr": 1e-3,
                "actor_lr_decay_at": 100,
                "actor_lr_decay": 0.25,
                **overrides,
            },
        )
        agent = make_loss(cfg, num_actions=5)
        llm = [p.detach().clone() for p in agent.llm_parameters()]
        updater = SACGLAMUpdater(agent, filled_replay, cfg)
        updater.step(env_steps=env_steps)
        return (
            max(float((p.detach() - b).abs().max()) for p, b in zip(agent.llm_parameters(), llm)),
            updater.critic_optimizer.param_groups[0]["lr"],
        )

    assert largest_changes(99) == (pytest.approx(1e-3, rel=0.05), 1e-3)
    assert largest_changes(100) == (pytest.approx(2.5e-4, rel=0.05), 1e-3)
    assert largest_changes(100, actor_lr=1e-9, critic_llm_lr=1e-3)[0] == pytest.approx(2.5e-4, rel=0.05)
    with pytest.raises(ValueError, match="actor_lr_decay"):
        make_config("smoke", {"actor_lr_decay": 0.0})


def test_success_loss_coef_trains_its_head_with_the_critics_optimiser(filled_replay):
    cfg = make_config("smoke", {"batch_size": 16, "warmup_updates": 0, "success_loss_coef": 0.5, "critic_llm_lr": 1e-3})
    agent = make_loss(cfg, num_actions=5)
    head = [p.detach().clone() for p in agent.success_head.parameters()]
    metrics = SACGLAMUpdater(agent, filled_replay, cfg).step()
    assert metrics["loss_success"] > 0
    assert all(not torch.equal(a, b) for a, b in zip(head, agent.success_head.parameters()))
    with pytest.raises(ValueError, match="success_loss_coef"):
        make_config("smoke", {"success_loss_coef": -1.0})


def test_critic_dueling_reaches_the_agent_and_is_checked(filled_replay):
    cfg = make_config("smoke", {"batch_size": 16, "warmup_updates": 0, "critic_dueling": True})
    agent = make_loss(cfg, num_actions=5)
    assert "prompt_hidden" in agent.head_keys
    value = [p.detach().clone() for p in agent.sac.qvalue_network_params.values(True, True)]
    assert math.isfinite(SACGLAMUpdater(agent, filled_replay, cfg).step()["loss_qvalue"])
    assert any(not torch.equal(a, b) for a, b in zip(value, agent.sac.qvalue_network_params.values(True, True)))
    with pytest.raises(ValueError, match="critic_dueling"):
        make_config("smoke", {"critic_dueling": True, "critic_input": "observation"})


def test_target_updates_copy_the_heads_and_never_the_llm(filled_replay):
    cfg = make_config("smoke", {"batch_size": 16, "warmup_updates": 0})
    agent = make_loss(cfg, num_actions=5)
    targets = agent.sac.target_qvalue_network_params
    llm_numel = sum(p.numel() for p in agent.scorer.parameters())
    assert sum(p.numel() for p in targets.values(True, True)) < llm_numel
    before = targets.clone()
    SACGLAMUpdater(agent, filled_replay, cfg).step()
    assert not torch.equal(
        before.flatten_keys()[list(before.flatten_keys().keys())[0]],
        targets.flatten_keys()[list(targets.flatten_keys().keys())[0]],
    )


def test_per_beta_end_anneals_the_samplers_beta_with_the_runs_steps(filled_replay):
    from torchrl_glam.data.replay import GoalReplay

    cfg = make_config("smoke", {"batch_size": 16, "per_beta_end": 1.0, "total_steps": 1000})
    replay = GoalReplay(capacity=5_000, strategy="ratio", environment=PLAYGROUND)
    replay.load_state_dict(filled_replay.state_dict())  # a copy: the fixture's beta stays
    updater = SACGLAMUpdater(make_loss(cfg, num_actions=5), replay, cfg)
    for steps, beta in ((500, 0.7), (1000, 1.0)):
        updater.step(env_steps=steps)
        assert [b.sampler.beta for b in replay.buffers] == pytest.approx([beta, beta])


def test_bootstrap_time_limit_reaches_the_n_step_returns():
    for value in (True, False):
        _, _, nstep = make_episode_processing(make_config("smoke", {"bootstrap_time_limit": value}))
        assert nstep.bootstrap_time_limit is value


@pytest.mark.slow
def test_smoke_run_of_the_example(tmp_path):
    run = tmp_path / "run"
    sets = ["train", "held_out", "train_distribution", "train_sampled"]
    code = load_example().main(
        ["--preset", "smoke", "--run-dir", str(run), "--no-progress", f"eval_sets={','.join(sets)}"]
    )
    assert code == 0
    assert (run / "checkpoint.pt").exists() and json.loads((run / "config.json").read_text())["hindsight"]["her"]
    scalars = run / "logs" / "scalars"
    for name in [
        "loss_qvalue",
        "alpha",
        "entropy",
        "q_value",
        "train/success",
        "batch/relabeled_share",
        "replay/relabeled_share",
        "time/wall_seconds",
        "eval/train/success",
        "eval/held_out/success",
    ]:
        assert (scalars / f"{name}.csv").exists(), name
    evaluations = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluations} == set(sets)
    cfg, agent, steps = load_trained_loss(run)  # what an analysis of the run starts from
    assert steps == 400 and cfg.run.eval_sets == sets
    saved = load_checkpoint(run)["loss"]
    assert all(torch.equal(value, saved[key]) for key, value in agent.trainable_state_dict().items())


def test_loading_a_run_without_a_checkpoint_names_the_run_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint in .*--run-dir"):
        load_trained_loss(tmp_path)


def _losses(run):
    rows = (run / "logs" / "scalars" / "loss_qvalue.csv").read_text().splitlines()
    return [tuple(map(float, row.split(","))) for row in rows]


def run_straight_and_resumed(tmp_path, preset: str, overrides: tuple[str, ...] = ()):
    """The same 192-step run (a preset with ``overrides``) twice: straight, and stopped at 96 then
    resumed. Asserts that both log the same critic losses; returns the two run dirs."""
    example = load_example()
    common = ["--preset", preset, "--no-progress", "log_every=8", "eval_every=96", "checkpoint_every=96", *overrides]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert example.main(common + ["--run-dir", str(straight), "total_steps=192"]) == 0
    assert example.main(common + ["--run-dir", str(resumed), "total_steps=96"]) == 0
    assert example.main(common + ["--run-dir", str(resumed), "total_steps=192", "--resume"]) == 0
    a, b = _losses(straight), _losses(resumed)
    assert len(a) == len(b) and any(step > 96 for step, _ in a)
    for (step_a, loss_a), (step_b, loss_b) in zip(a, b):
        assert step_a == step_b and loss_a == pytest.approx(loss_b, rel=1e-5, abs=1e-7)
    return straight, resumed


@pytest.mark.slow
def test_resume_gives_the_same_next_losses_as_an_uninterrupted_run(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke")
    final = [read_checkpoint(run / "checkpoint.pt") for run in (straight, resumed)]
    for key, value in final[0]["loss"].items():
        assert torch.allclose(value, final[1]["loss"][key], atol=1e-6), key


@pytest.mark.slow
def test_a_resume_may_add_evaluation_sets_without_changing_the_training(tmp_path):
    example = load_example()
    common = ["--preset", "smoke", "--no-progress", "log_every=8", "eval_every=96", "checkpoint_every=96"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert example.main(common + ["--run-dir", str(straight), "total_steps=192"]) == 0
    assert example.main(common + ["--run-dir", str(resumed), "total_steps=96"]) == 0
    added = "eval_sets=train,held_out,train_sampled,held_out_sampled"
    assert example.main(common + ["--run-dir", str(resumed), "total_steps=192", "--resume", added]) == 0
    assert _losses(straight) == _losses(resumed)  # the sampled evaluations draw from their own stream
    evaluations = [json.loads(line) for line in (resumed / "evaluations.jsonl").read_text().splitlines()]
    assert {(e["env_steps"], e["set"]) for e in evaluations if "sampled" in e["set"]} == {
        (192, "train_sampled"),
        (192, "held_out_sampled"),
    }


@pytest.mark.slow
def test_resume_on_babyai_gives_the_same_next_losses_as_an_uninterrupted_run(tmp_path):
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    run_straight_and_resumed(tmp_path, "smoke_babyai")


@pytest.mark.slow
def test_resume_on_textworld_gives_the_same_next_losses_as_an_uninterrupted_run(tmp_path):
    pytest.importorskip("textworld", reason="TextWorld needs the textworld extra")
    run_straight_and_resumed(tmp_path, "smoke_textworld", ["history=2"])


@pytest.mark.slow
def test_resume_with_hindsight_negatives_restores_the_goals_reported_so_far(tmp_path):
    # normalization "mean": the smoke model then reaches objects, so goals are reported
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke", ["normalization=mean", "her_negatives=2"])
    final = [
        read_checkpoint(run / "checkpoint.pt")["her"]["_extra_state"]["goal_memory"]["first_seen"]
        for run in (straight, resumed)
    ]
    assert (final[0] >= 0).sum() > 10 and torch.equal(final[0], final[1])


@pytest.mark.slow
def test_resume_with_noop_twins_draws_the_same_noops(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke", ["normalization=mean", "noop_twins=true"])
    final = [
        read_checkpoint(run / "checkpoint.pt")["noop_twins"]["_extra_state"]["generator"] for run in (straight, resumed)
    ]
    assert torch.equal(final[0], final[1])
    assert not torch.equal(final[0], torch.Generator().manual_seed(0).get_state())  # twins were drawn


@pytest.mark.slow
def test_resume_with_twins_and_types_uniform_batches_gives_the_same_losses(tmp_path):
    # the full task set's setting that experiments/cpu_full continues past 100k with --resume
    straight, resumed = run_straight_and_resumed(
        tmp_path,
        "smoke",
        ["normalization=mean", "goals=train", "her_twins=true", "batch_strategy=types_uniform", "target_llm=true"],
    )
    final = [read_checkpoint(run / "checkpoint.pt")["her"]["_extra_state"]["generator"] for run in (straight, resumed)]
    assert torch.equal(final[0], final[1])


@pytest.mark.slow
def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    from torchrl_glam.objectives.sac_glam import SACGLAMLoss

    forward, calls = SACGLAMLoss.forward, {"n": 0}

    def poisoned(self, batch, warmup=False):
        out = forward(self, batch, warmup)
        calls["n"] += 1
        if calls["n"] > 12:
            out["loss_qvalue"] = out["loss_qvalue"] * float("nan")
        return out

    monkeypatch.setattr(SACGLAMLoss, "forward", poisoned)
    run = tmp_path / "run"
    code = load_example().main(
        ["--preset", "smoke", "--run-dir", str(run), "--no-progress", "checkpoint_every=64", "eval_every=1000"]
    )
    assert code == 1
    assert "non-finite loss" in capsys.readouterr().err
    saved = read_checkpoint(run / "checkpoint.pt")
    assert saved["updater"]["updates"] <= 12
    assert all(torch.isfinite(v).all() for v in saved["loss"].values() if v.is_floating_point())


def test_lora_checkpoints_hold_the_adapters_not_the_frozen_base_model():
    cfg = make_config("smoke", {"lora_rank": 4})
    agent = make_loss(cfg, num_actions=5)
    state = agent.trainable_state_dict()
    assert any("lora_" in k for k in state) and any(k.startswith("sac.") for k in state)
    frozen = [k for k, p in agent.named_parameters() if not p.requires_grad]
    assert frozen and not set(frozen) & set(state)
    other = make_loss(cfg, num_actions=5)
    other.load_trainable_state_dict({k: v + 1 if v.is_floating_point() else v for k, v in state.items()})
    lora = next(k for k in state if "lora_" in k)
    assert torch.equal(other.state_dict()[lora], state[lora] + 1)
    with pytest.raises(ValueError, match="does not fit this agent"):
        make_loss(make_config("smoke"), num_actions=5).load_trainable_state_dict(state)


@pytest.mark.slow
def test_resume_with_a_critic_llm_lr_restores_its_optimiser(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke", ["critic_llm_lr=3e-4"])
    final = [read_checkpoint(run / "checkpoint.pt") for run in (straight, resumed)]
    assert final[0]["updater"]["critic_llm_optimizer"]["state"]
    for key, value in final[0]["loss"].items():
        assert torch.allclose(value, final[1]["loss"][key], atol=1e-6), key


@pytest.mark.slow
def test_resume_with_a_target_llm_restores_it(tmp_path):
    straight, resumed = run_straight_and_resumed(tmp_path, "smoke", ["target_llm=true"])
    final = [read_checkpoint(run / "checkpoint.pt")["loss"] for run in (straight, resumed)]
    targets = [key for key in final[0] if key.startswith("target_llm.")]
    assert targets and all(torch.allclose(final[0][key], final[1][key], atol=1e-6) for key in targets)


def test_her_and_noop_twins_checkpoint_their_state():
    from torchrl_glam.data.her import HindsightRelabel
    from torchrl_glam.data.noop_twins import NoOpTwins

    her, twins = (
        HindsightRelabel(seed=0, negatives_per_episode=2, environment=PLAYGROUND),
        NoOpTwins(seed=0, environment=PLAYGROUND),
    )
    torch.rand(3, generator=her.generator)  # states that no seed of the pieces below gives
    torch.rand(5, generator=twins.generator)
    first_seen = torch.full_like(her.memory.first_seen, -1)
    first_seen[[2, 5]] = torch.tensor([10, 40])
    her.memory.first_seen.copy_(first_seen)
    # each piece's state_dict round-trips into a fresh piece
    fresh_her, fresh_twins = (
        HindsightRelabel(seed=1, negatives_per_episode=2, environment=PLAYGROUND),
        NoOpTwins(seed=1, environment=PLAYGROUND),
    )
    fresh_her.load_state_dict(her.state_dict())
    fresh_twins.load_state_dict(twins.state_dict())
    assert torch.equal(fresh_her.generator.get_state(), her.generator.get_state())
    assert torch.equal(fresh_her.memory.first_seen, first_seen)
    assert torch.equal(fresh_twins.generator.get_state(), twins.generator.get_state())


def test_a_checkpoint_in_the_layout_of_0_1_0_is_refused_with_the_version(tmp_path, capsys):
    from torchrl_glam.algorithms.sac_glam.train import cli
    from torchrl_glam.training.checkpoint import save_checkpoint

    run = tmp_path / "run"
    common = ["--preset", "smoke", "--no-progress", "--run-dir", str(run), "her_negatives=2", "noop_twins=true"]
    assert load_example().main([*common, "total_steps=16", "eval_every=16", "checkpoint_every=16"]) == 0
    # 0.1.0's first layout: HER's generator, its goal memory and the twins' generator as entries
    state = load_checkpoint(run)
    her, twins = state.pop("her")["_extra_state"], state.pop("noop_twins")["_extra_state"]
    state.update(
        her_generator=her["generator"], her_goal_memory=her["goal_memory"], noop_twins_generator=twins["generator"]
    )
    save_checkpoint(state, run)
    capsys.readouterr()
    assert cli([*common, "total_steps=32", "eval_every=16", "checkpoint_every=16", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: "), err
    assert (
        "checkpoint.pt was written by torchrl_glam 0.1.0 (its her_generator, her_goal_memory, noop_twins_generator), "
        "which this version does not read: resume it with torchrl_glam 0.1.0, or start a new run"
    ) in err, err


def test_a_checkpoint_of_0_2_is_refused_with_the_version(tmp_path, capsys):
    from torchrl_glam.algorithms.sac_glam.train import cli
    from torchrl_glam.training.checkpoint import DIGEST_0_2_KEY, DIGEST_KEY

    run = tmp_path / "run"
    common = ["--preset", "smoke", "--no-progress", "--run-dir", str(run)]
    assert load_example().main([*common, "total_steps=16", "eval_every=16", "checkpoint_every=16"]) == 0
    # 0.2's digest depended on the order of sets: its checkpoints are not read, nor their fallback
    for path in run.glob("checkpoint*.pt"):
        plain = torch.load(path, weights_only=True)
        plain[DIGEST_0_2_KEY] = plain.pop(DIGEST_KEY)
        torch.save(plain, path)
    capsys.readouterr()
    assert cli([*common, "total_steps=32", "eval_every=16", "checkpoint_every=16", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "checkpoint.pt was written by torchrl_glam 0.2 (its digest content_sha256)" in err, err
    assert "resume it with torchrl_glam 0.2, or start a new run" in err, err
