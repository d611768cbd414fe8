"""The offline tiny models: tokenizer, determinism, save/load round trip, near-uniform initial policy,
the cached default path and the command line."""

import os
import threading
from pathlib import Path

import pytest
import torch

from torchrl_glam.envs.playground.vocabulary import vocabulary_words
from torchrl_glam.modules import LLMConfig, load_llm
from torchrl_glam.offline import resolve
from torchrl_glam.offline.models import tiny_model_recipe
from torchrl_glam.offline.shipped import recipe_version
from torchrl_glam.offline.tiny import build_tiny_model, build_word_tokenizer, main


def test_word_tokenizer_splits_words_and_punctuation(kind):
    tokenizer = build_word_tokenizer(kind)
    text = "Goal: Grow red living_thing then grasp any blue thing\nYou see: green water, red cat\nAction: "
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert tokens[:2] == ["Goal", ":"] and "living_thing" in tokens and tokens[-2:] == ["Action", ":"]
    assert tokens.count(",") == 1 and tokenizer.unk_token not in tokens
    assert all(tokenizer.convert_tokens_to_ids(word) != tokenizer.unk_token_id for word in vocabulary_words())
    assert tokenizer.pad_token_id == 0 and tokenizer.eos_token_id == 1


def test_build_is_deterministic(tmp_path):
    first = load_llm(LLMConfig(str(build_tiny_model(tmp_path / "a", "t5", seed=0)))).model.state_dict()
    second = load_llm(LLMConfig(str(build_tiny_model(tmp_path / "b", "t5", seed=0)))).model.state_dict()
    other = load_llm(LLMConfig(str(build_tiny_model(tmp_path / "c", "t5", seed=1)))).model.state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert not all(torch.equal(first[name], other[name]) for name in first)


def test_round_trip_through_save_pretrained(kind, tiny_paths, make_scorer_for, playground_batch, tmp_path):
    scorer = make_scorer_for(tiny_paths[kind], lora_rank=0)
    with torch.no_grad():  # give the weights a non-initial state, as after training
        for parameter in scorer.model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    scorer.model.save_pretrained(tmp_path / "saved")
    scorer.tokenizer.save_pretrained(tmp_path / "saved")
    reloaded = make_scorer_for(tmp_path / "saved")
    batch = playground_batch(3, 4, uneven=True)
    with torch.no_grad():
        for before, after in zip(scorer(*batch), reloaded(*batch)):
            assert torch.equal(before, after)


def test_initial_policy_is_close_to_uniform(kind, tiny_paths, make_scorer_for, playground_batch):
    """Per-token distributions are near uniform, so candidates of equal token length are near
    equiprobable, and the per-token mean score gives a near-uniform policy over all candidates.
    (With the paper's summed score, a near-uniform LM prefers short candidates: "Grasp" is one token,
    "Go to red cat" four.)"""
    prompts, actions, mask = playground_batch(8, 6, seed=3, uneven=True)
    scorer = make_scorer_for(tiny_paths[kind])
    with torch.no_grad():
        summed = scorer(prompts, actions, mask)[0]
        mean = make_scorer_for(tiny_paths[kind], normalization="mean")(prompts, actions, mask)[0]
        logits = scorer.model(
            input_ids=scorer.tokenizer(prompts[:1], return_tensors="pt")["input_ids"],
            **({"decoder_input_ids": torch.zeros(1, 1, dtype=torch.long)} if kind == "t5" else {}),
        ).logits[0, -1]
    assert logits.std() < 0.2  # a default T5 init gives ~11
    go_to = summed[:, :6].softmax(-1)  # the six 4-token "Go to <colour> <type>" candidates
    assert (go_to.max(-1).values / go_to.min(-1).values).max() < 1.5
    policy = mean.softmax(-1)
    assert (policy.max(-1).values / policy.min(-1).values).max() < 1.5


def test_default_path_builds_once_under_concurrency(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", "0")  # the cache build, not the shipped copy
    paths, errors = [], []

    def build():
        try:
            paths.append(Path(resolve("offline:tiny-t5").build()))
        except Exception as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(paths)) == 1
    path = paths[0]
    assert path.parent == tmp_path / "cache" and (path / "config.json").exists()
    assert [n for n in os.listdir(tmp_path / "cache") if not n.endswith(".lock")] == [path.name]  # no staging left
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert Path(resolve("offline:tiny-t5").build()) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    # the offline default is what LLMConfig(name_or_path=None) loads
    assert load_llm(LLMConfig()).model.config.d_model == 64


def test_command_line_builds_a_loadable_model(tmp_path, capsys):
    main(["--out", str(tmp_path / "llama"), "--kind", "llama"])
    assert "LLMConfig(name_or_path=" in capsys.readouterr().out
    llm = load_llm(LLMConfig(str(tmp_path / "llama")))
    assert not llm.is_encoder_decoder and llm.model.config.hidden_size == 64


def test_a_nonzero_rank_of_a_process_group_builds_a_complete_model(tmp_path, monkeypatch):
    """Inside a process group, transformers saves config and weights on rank 0 only; the offline
    model is built by whichever rank gets there first, so every rank must write all of it."""
    import transformers.distributed.mixin as mixin

    monkeypatch.setattr(mixin, "_is_torch_distributed_initialized", lambda: True)
    monkeypatch.setattr(mixin, "_get_torch_distributed_rank", lambda: 1)
    path = build_tiny_model(tmp_path / "rank1", "t5")
    assert (path / "config.json").exists() and list(path.glob("*.safetensors"))
    assert load_llm(LLMConfig(str(path))).is_encoder_decoder


def test_a_broken_cached_build_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCHRL_GLAM_SHIPPED_WEIGHTS", "0")
    broken = tmp_path / f"tiny-t5-{recipe_version(tiny_model_recipe('t5'))}"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{}")  # what a rank-1 build used to leave
    path = Path(resolve("offline:tiny-t5").build())
    assert path == broken and load_llm(LLMConfig(str(path))).is_encoder_decoder


def test_loading_an_offline_model_never_builds_it(tmp_path, monkeypatch, capsys):
    # load_llm loads only: an offline model not built on this machine is refused with the command
    # that builds it, and the cache stays empty; that command (or a training run) builds it
    from torchrl_glam.modules import OfflineModelNotBuilt
    from torchrl_glam.offline.__main__ import main as build

    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path / "cache"))
    refusal = r"offline:tiny-llama .*not built.*`python -m torchrl_glam.offline tiny-llama`"
    with pytest.raises(OfflineModelNotBuilt, match=refusal):
        load_llm(LLMConfig("offline:tiny-llama"))
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    build(["tiny-llama"])
    assert "offline:tiny-llama is in" in capsys.readouterr().out
    assert not load_llm(LLMConfig("offline:tiny-llama")).is_encoder_decoder


def test_making_a_loss_never_builds_its_model_the_run_builds_it_first(tmp_path, monkeypatch):
    """Issue 86 (item 3): a model is built in an explicit step before the run, never as a side
    effect of making the loss (which could pretrain for minutes)."""
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    from torchrl_glam.algorithms.sac_glam.build import make_loss
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.modules import OfflineModelNotBuilt

    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(tmp_path))
    cfg = make_config("smoke_babyai", {"model": None})  # BabyAI-Text's own random-init tiny T5: not shipped
    with pytest.raises(OfflineModelNotBuilt, match=r"`python -m torchrl_glam\.offline tiny-t5 --env babyai`"):
        make_loss(cfg, num_actions=6)
    assert list(tmp_path.iterdir()) == []  # nothing built
    from torchrl_glam.training.factories import build_model

    built = build_model(cfg)  # the explicit step (TrainingRun takes it before anything else)
    assert Path(built).parent == tmp_path and cfg.resolved_model.path() == built
    assert make_loss(cfg, num_actions=6).glam_agent.llm.tokenizer.convert_tokens_to_ids("toggle") != 2  # its words
