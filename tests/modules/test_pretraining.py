"""Pretraining the offline model on random-play transcripts: the data is random play in the
environment's words, a few steps lower the loss, the result loads by path and by offline name."""

from pathlib import Path

import pytest
import torch

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GoalCatalogue
from torchrl_glam.envs.playground.render import render_actions
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES
from torchrl_glam.modules import LLMConfig, load_llm
from torchrl_glam.modules.loading import resolve_model_path
from torchrl_glam.offline import resolve
from torchrl_glam.offline.models import OfflineModelNotBuilt, pretraining_recipe, tiny_model_recipe
from torchrl_glam.offline.pretraining import lm_batch, pretrain, transcripts_nll
from torchrl_glam.offline.shipped import recipe_version
from torchrl_glam.offline.transcripts import HindsightTranscripts, RandomPlayTranscripts


def _prompt_field(prompt: str, name: str) -> str:
    return next(line for line in prompt.splitlines() if line.startswith(name)).split(": ", 1)[1]


def test_transcripts_are_random_legal_actions_followed_by_their_outcome():
    data = RandomPlayTranscripts(num_envs=16, seed=3)
    prompts, targets = data.batch(400)
    first_moves = []
    for prompt, target in zip(prompts, targets):
        action, outcome, reports = (part.strip() for part in target.split(" : "))
        seen = _prompt_field(prompt, "You see").split(", ")
        holding = _prompt_field(prompt, "You are holding")
        scene = seen + ([holding] if holding != "nothing" else [])
        assert all(name in OBJECT_NAMES for name in scene)
        assert action in render_actions([OBJECT_NAMES.index(n) for n in scene])  # a candidate of the state
        assert action != f"Go to {holding}"  # never a masked action
        assert outcome.startswith("You are on: ") and ", You are holding: " in outcome
        if action.startswith("Go to"):
            assert outcome.startswith(f"You are on: {action.removeprefix('Go to ')} ")
        if reports != "nothing":  # the social partner reports only what the action did
            assert action in ("Grasp", "Release") or action.startswith("Go to")
            assert all(r.startswith(("Grasp ", "Grow ")) for r in reports.split(", "))
        if _prompt_field(prompt, "You are on") == "nothing" and holding == "nothing":
            first_moves.append(action)
    # uniform over the legal candidates: every kind of first move occurs in a fair share
    shares = {
        kind: sum(a.startswith(kind) for a in first_moves) / len(first_moves) for kind in ("Go to", "Grasp", "Release")
    }
    assert 0.4 < shares["Go to"] < 0.9 and shares["Grasp"] > 0.05 and shares["Release"] > 0.05


def test_a_few_steps_lower_the_loss_and_the_result_loads(tmp_path, tiny_paths):
    torch.manual_seed(0)
    out = pretrain(tmp_path / "pre", start_from=tiny_paths["t5"], steps=30, batch_size=16, lr=3e-3, seed=1)
    fixed = RandomPlayTranscripts(num_envs=8, seed=99).batch(32)

    def loss(path):
        llm = load_llm(LLMConfig(str(path)))
        with torch.no_grad():
            return llm.model(**lm_batch(llm.tokenizer, *fixed, True)).loss.item()

    assert loss(out) < loss(tiny_paths["t5"]) - 0.5
    assert (out / "pretraining.txt").read_text().startswith("random-play transcripts")


def test_decoder_only_pretraining_runs(tmp_path, tiny_paths):
    out = pretrain(tmp_path / "pre", start_from=tiny_paths["llama"], steps=2, batch_size=4)
    assert not load_llm(LLMConfig(str(out))).is_encoder_decoder


def test_offline_model_names(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", "0")  # the cache build (shipped: test_shipped_weights.py)
    model = resolve("offline:tiny-t5")
    with pytest.raises(OfflineModelNotBuilt, match="python -m torchrl_glam.offline tiny-t5`"):
        model.path()  # finding never builds
    built = Path(model.build())  # the explicit step builds; loading only finds it
    assert built == tmp_path / f"tiny-t5-{recipe_version(tiny_model_recipe('t5'))}" and (built / "config.json").exists()
    assert resolve_model_path("offline:tiny-t5") == model.path() == str(built)
    with pytest.raises(ValueError, match="unknown offline model 'offline:tiny-gpt'.*offline:tiny-t5-pretrained"):
        resolve_model_path("offline:tiny-gpt")


def test_pretraining_is_deterministic(tmp_path, tiny_paths):
    """The cached default model is whatever the command builds: same seed, same weights."""
    first, second = (
        load_llm(
            LLMConfig(str(pretrain(tmp_path / name, start_from=tiny_paths["t5"], steps=3, batch_size=8, seed=4)))
        ).model.state_dict()
        for name in ("a", "b")
    )
    assert all(torch.equal(first[name], second[name]) for name in first)


def _go_to_matching_share(prompts, targets, catalogue):
    """Under a single grasp goal "Grasp D", with an empty hand and not on an object matching D: the
    share of moves that go to an object matching D, and the share a uniformly random legal action
    would have."""
    hits = chance = count = 0
    for prompt, target in zip(prompts, targets):
        goal = _prompt_field(prompt, "Goal")
        if catalogue.type_of(goal) != "grasp" or _prompt_field(prompt, "You are holding") != "nothing":
            continue
        matching = set(catalogue.matching_objects(goal.removeprefix("Grasp ")))
        on = _prompt_field(prompt, "You are on")
        if on in matching:
            continue
        scene = _prompt_field(prompt, "You see").split(", ")
        action = target.split(" : ")[0]
        hits += action.startswith("Go to") and action.removeprefix("Go to ") in matching
        # every candidate is legal but "Go to" the object the agent is on
        chance += sum(name in matching for name in scene) / (len(scene) + 2 - (on != "nothing"))
        count += 1
    return hits / count, chance / count, count


def test_hindsight_goals_name_what_the_random_actions_went_on_to_do():
    """The link random transcripts lack (experiments/cpu_full, Session 9): under a hindsight goal
    "Grasp D" the moves go to an object matching D far more often than chance; the goals
    are the task sets' own (never held out); the other half of the stream is random play as before."""
    catalogue = GoalCatalogue.default()
    data = HindsightTranscripts(num_envs=32, seed=5, hindsight_share=1.0)
    prompts, targets = data.batch(3000)
    allowed = {catalogue.goals[g] for g in catalogue.train_ids}
    assert {_prompt_field(p, "Goal") for p in prompts} <= allowed
    share, _, count = _go_to_matching_share(prompts, targets, catalogue)
    plain, chance, _ = _go_to_matching_share(*RandomPlayTranscripts(num_envs=32, seed=5).batch(3000), catalogue)
    assert plain < 1.15 * chance  # random play's own goals say nothing of its actions
    assert count > 500 and share > 1.5 * plain  # measured 1.8-2.2x on seeds 5-7
    mixed = HindsightTranscripts(num_envs=32, seed=5, hindsight_share=0.5)
    assert mixed.batch(64) != RandomPlayTranscripts(num_envs=32, seed=5).batch(64)


def test_hindsight_pretraining_is_its_own_recipe_and_offline_name():
    assert pretraining_recipe("t5") != pretraining_recipe("t5", data="hindsight")
    assert recipe_version(pretraining_recipe("t5")) != recipe_version(pretraining_recipe("t5", data="hindsight"))
    with pytest.raises(ValueError, match="unknown pretraining data 'oracle'.*hindsight"):
        pretraining_recipe("t5", data="oracle")
    assert resolve_model_path("offline:tiny-t5-hindsight").endswith("tiny-t5-hindsight")


def test_pretraining_takes_a_stream_and_says_which(tmp_path, tiny_paths):
    out = pretrain(
        tmp_path / "pre",
        start_from=tiny_paths["t5"],
        steps=2,
        batch_size=4,
        data=HindsightTranscripts(num_envs=8, seed=1, hindsight_share=1.0, window=2),
    )
    assert (
        "1 of them with hindsight goals, the last 2 steps before each report" in (out / "pretraining.txt").read_text()
    )
    with pytest.raises(ValueError, match="unknown pretraining data 'oracle'"):
        pretrain(tmp_path / "bad", start_from=tiny_paths["t5"], steps=2, data="oracle")


def test_babyai_transcripts_are_the_action_the_next_view_and_the_reports_of_training_goals():
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    from torchrl_glam.envs.babyai.text import ACTIONS, BabyAIGoalCatalogue

    catalogue = BabyAIGoalCatalogue.default()
    train = {catalogue.goals[g] for g in catalogue.goal_set("train")}
    prompts, targets = RandomPlayTranscripts(num_envs=8, seed=0, environment=get_environment("babyai")).batch(128)
    for prompt, target in zip(prompts, targets):
        goal = prompt.split("Goal of the agent: ")[1].split(" \n")[0]  # GLAM's prompt: " \n " between parts
        assert goal in train  # held-out goals are never shown
        action, view, reports = target.split(" : ")
        assert action in ACTIONS and view.startswith("You ")
        assert reports == "nothing" or reports.split(", ")[0] in catalogue  # goals joined by ", "
    assert any(target.split(" : ")[2] != "nothing" for target in targets)


def test_babyai_s_pretraining_recipe_names_the_text_of_its_transcripts():
    """A model pretrained on the former wording is never taken for one pretrained on GLAM's text."""
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    from torchrl_glam.envs import get_environment

    glam = pretraining_recipe("t5", environment=get_environment("babyai"))
    readable = pretraining_recipe("t5", environment=get_environment("babyai").with_options(wording="readable"))
    assert glam["text"] == "glam" and readable["text"] == "readable"
    assert recipe_version(glam) != recipe_version(readable)
    assert "text" not in pretraining_recipe("t5")  # Playground-Text's recipe (and version name) unchanged


def test_an_environment_is_known_by_its_name_not_by_the_registry_s_instance():
    # a user's own PlaygroundText() (not the registry's) names the same offline models and recipes
    from torchrl_glam.envs.playground import PlaygroundText
    from torchrl_glam.offline.models import offline_name

    own = PlaygroundText()
    assert offline_name("t5", "random", own) == offline_name("t5", "random") == "tiny-t5-pretrained"
    assert pretraining_recipe("t5", environment=own) == pretraining_recipe("t5")
    assert resolve("offline:tiny-t5-pretrained", own).path() == resolve("offline:tiny-t5-pretrained").path()


@pytest.mark.parametrize("model_kind", ["t5", "llama"])
def test_a_batch_in_length_groups_has_the_whole_batchs_loss_and_gradients(monkeypatch, tiny_paths, model_kind):
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from torchrl_glam.offline import pretraining

    path = tiny_paths[model_kind]
    loader = AutoModelForSeq2SeqLM if model_kind == "t5" else AutoModelForCausalLM
    model, tokenizer = loader.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    encoder_decoder = model_kind == "t5"
    with torch.random.fork_rng(devices=[]):
        batch = lm_batch(tokenizer, *RandomPlayTranscripts(seed=3).batch(12), encoder_decoder)

    def loss_and_gradients():
        model.zero_grad(set_to_none=True)
        value = transcripts_nll(model, batch, encoder_decoder, backward=True)
        return value, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    whole, whole_grads = loss_and_gradients()
    assert whole == pytest.approx(model(**batch).loss.item(), rel=1e-6)  # one group: the batch as it is
    # two rows a group at most
    longest = int(((batch["labels"] != -100) if encoder_decoder else batch["attention_mask"]).sum(1).max())
    monkeypatch.setattr(pretraining, "GROUP_LOGITS", 2 * longest * model.config.vocab_size)
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    grouped, grouped_grads = loss_and_gradients()
    assert len(calls) >= 6
    assert grouped == pytest.approx(whole, rel=1e-6)
    assert grouped_grads.keys() == whole_grads.keys()
    for name, grad in whole_grads.items():
        torch.testing.assert_close(grouped_grads[name], grad, rtol=0, atol=1e-5 * max(float(grad.abs().max()), 1.0))


def _weights(path) -> dict:
    return load_llm(LLMConfig(str(path))).model.state_dict()


def test_a_build_that_died_continues_from_its_last_state_to_the_uninterrupted_build(tmp_path, tiny_paths, monkeypatch):
    """A crash, kill or preemption loses at most CHECKPOINT_SECONDS of a build: the next call with
    the same settings continues from the saved step and writes the uninterrupted build's weights."""
    from torchrl_glam.offline import pretraining

    settings = dict(start_from=tiny_paths["t5"], steps=6, batch_size=8, seed=4)
    whole = pretrain(tmp_path / "whole", **settings, checkpoint=tmp_path / "whole.partial.pt")
    assert not (tmp_path / "whole.partial.pt").exists()  # removed once the model is written

    monkeypatch.setattr(pretraining, "CHECKPOINT_SECONDS", 0.0)  # a state after every step
    checkpoint, original, calls = tmp_path / "resumed.partial.pt", pretraining.transcripts_nll, []

    def dies_at_the_fourth_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(pretraining, "transcripts_nll", dies_at_the_fourth_step)
    with pytest.raises(RuntimeError, match="killed"):
        pretrain(tmp_path / "resumed", **settings, checkpoint=checkpoint)
    assert torch.load(checkpoint, weights_only=True)["step"] == 3
    monkeypatch.setattr(pretraining, "transcripts_nll", original)
    # another build's state is not taken for this one's
    other = pretrain(tmp_path / "other", **{**settings, "seed": 5}, checkpoint=checkpoint)
    assert not any(torch.equal(a, b) for a, b in zip(_weights(other).values(), _weights(whole).values()))
    with pytest.raises(RuntimeError, match="killed"):
        calls.clear()
        monkeypatch.setattr(pretraining, "transcripts_nll", dies_at_the_fourth_step)
        pretrain(tmp_path / "resumed", **settings, checkpoint=checkpoint)
    monkeypatch.setattr(pretraining, "transcripts_nll", original)
    resumed = pretrain(tmp_path / "resumed", **settings, checkpoint=checkpoint)
    expected, got = _weights(whole), _weights(resumed)
    assert all(torch.equal(expected[name], got[name]) for name in expected)
    assert not checkpoint.exists()


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_a_build_in_one_line_and_the_same_command_continues_it(tmp_path, tiny_paths, stop):
    import os
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "torchrl_glam.offline.pretraining", "--out", str(tmp_path / "model")]
    command += ["--start-from", str(tiny_paths["t5"]), "--steps", "100000", "--batch-size", "4", "--threads", "1"]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment)
    lines = []
    for line in process.stderr:  # a progress line every 50 steps in a log file
        lines.append(line)
        if line.startswith("pretraining step 50/"):
            break
    process.send_signal(getattr(signal, stop))
    err = "".join(lines) + process.stderr.read()
    assert process.wait(timeout=120) == 3, err  # the training scripts' code for a stop with its state saved
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    assert last.startswith("stopped: stopped pretraining ") and "its state is saved in" in last, err
    step = int(last.split(" at step ")[1].split("/")[0])
    assert step >= 50 and (tmp_path / ".model.partial.pt").exists()
    if stop == "SIGTERM":  # the same command continues from there (stopped again once it has)
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment)
        first = next(line for line in process.stderr if line.startswith(("continuing", "pretraining step")))
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=120)
        assert first.startswith(f"continuing the build from step {step}/100000"), first


def test_a_training_command_line_stopped_while_building_its_model_says_so_in_one_line(capsys):
    from torchrl_glam.offline.models import BuildStopped
    from torchrl_glam.training.cli import command_line
    from torchrl_glam.training.preemption import PREEMPTED

    def stopped(argv):
        raise BuildStopped("stopped pretraining the tiny t5 model at step 7/600; ...")

    assert command_line(stopped, []) == PREEMPTED == BuildStopped.exit_code
    assert capsys.readouterr().err == "stopped: stopped pretraining the tiny t5 model at step 7/600; ...\n"


def test_a_build_into_a_folder_that_does_not_exist_yet_saves_its_state_there(tmp_path, tiny_paths, monkeypatch):
    """`--out new/folder/model`: the state beside it was written before the folder existed."""
    from torchrl_glam.offline import pretraining

    monkeypatch.setattr(pretraining, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "new" / "folder" / "model"
    written = pretrain(
        out, start_from=tiny_paths["t5"], steps=3, batch_size=4, checkpoint=pretraining.partial_build_path(out)
    )
    assert (written / "config.json").exists() and not pretraining.partial_build_path(out).exists()
