"""The speed work on the scorer (issue 84) must not move what an update computes: every loss term
and LLM gradient of one SAC-GLAM update of ``cpu_babyai`` equal, to 1e-6 in float32, to what
b96b62f computed on the same batch (``update_reference.py`` wrote both)."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tensordict import TensorDict
from update_reference import LOSS_TERMS, make_loss_and_env, one_update

from torchrl_glam.envs import get_environment
from torchrl_glam.modules.length_groups import CPU_GROUP_TOKEN_PAIRS, length_groups

REFERENCE = Path(__file__).parent / "references" / "update_b96b62f.safetensors"

pytest.importorskip("minigrid")


@pytest.fixture(scope="module")
def reference():
    stored = load_file(REFERENCE)
    batch = {k.removeprefix("batch."): v for k, v in stored.items() if k.startswith("batch.")}
    batch = TensorDict(batch, batch_size=[len(batch["goal_id"])]).unflatten_keys(".")
    return batch, {k: v for k, v in stored.items() if not k.startswith("batch.")}


def test_one_update_equals_b96b62fs_to_1e6(reference, offline_model):
    batch, expected = reference
    offline_model("offline:tiny-t5", get_environment("babyai"))  # loading never builds: alone, it must
    loss, _ = make_loss_and_env()
    # the batch's prompts are long enough to be scored in several length groups
    prompts, _, _ = loss.environment.observations({k: batch[k] for k in loss.environment.state_keys})
    lengths = torch.tensor([len(ids) for ids in loss.scorer.tokenizer(list(prompts))["input_ids"]])
    assert len(length_groups(lengths, CPU_GROUP_TOKEN_PAIRS)) > 1
    got = one_update(loss, batch)
    assert set(got) == set(expected)
    for name in LOSS_TERMS:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    gradients = [name for name in expected if name not in LOSS_TERMS]
    assert len(gradients) > 10
    for name in gradients:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
