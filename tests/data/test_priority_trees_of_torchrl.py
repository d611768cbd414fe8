"""The replay's priority trees (issue 89): TorchRL's compiled segment trees wherever torchrl's
extension loads, this package's numpy ones (``torchrl_glam/data/prioritized.py``) only where it does
not. The fact that choice rests on is a test, so a torch or torchrl bump shows when it changes; and
where both exist, they give the same numbers, so a run samples the same batches on every torch."""

import numpy as np
import pytest
import torch
import torchrl
from packaging.version import Version

from torchrl_glam.data import prioritized

TREES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64")
#: the first torch series beside which each supported torchrl release's compiled extension loads
#: (its wheel is built against torch 2.14: on 2.13 it fails with an undefined symbol)
COMPILED_TREES_LOAD_FROM = {"0.14.1": (2, 14)}


def compiled_trees():
    """torchrl's compiled extension, or ``None`` where it does not load beside this torch."""
    try:
        import torchrl._torchrl as compiled
    except ImportError:
        return None
    return compiled


def test_torchrl_s_compiled_trees_load_from_the_torch_its_wheel_is_built_for():
    first = COMPILED_TREES_LOAD_FROM.get(torchrl.__version__)
    assert first is not None, (
        f"torchrl {torchrl.__version__} is new here: note from which torch its compiled extension loads, and "
        "whether torchrl_glam/data/prioritized.py's fallback trees are still needed"
    )
    assert (compiled_trees() is not None) == (Version(torch.__version__).release[:2] >= first)


def test_the_package_s_trees_stand_in_exactly_where_torchrl_s_do_not_load():
    from torchrl.data.replay_buffers.samplers import prioritized as sampler_module

    prioritized.ensure_prioritized_replay()
    ours = [getattr(sampler_module, name) is getattr(prioritized, name) for name in TREES]
    assert ours == [compiled_trees() is None] * len(TREES)


needs_compiled = pytest.mark.skipif(
    compiled_trees() is None, reason="torchrl's compiled trees do not load beside this torch (CI's torch 2.14 pass)"
)


@needs_compiled
@pytest.mark.parametrize("name", TREES)
def test_the_package_s_trees_give_torchrl_s_numbers(name):
    ours, theirs = getattr(prioritized, name)(1000), getattr(compiled_trees(), name)(1000)
    dtype = torch.float32 if name.endswith("32") else torch.float64
    rng = np.random.default_rng(0)
    for _ in range(200):
        index = torch.as_tensor(rng.integers(0, 1000, rng.integers(1, 64)))
        value = torch.as_tensor(rng.random(len(index)) * 10 + 1e-3, dtype=dtype)
        ours[index], theirs[index] = value, value
        left = int(rng.integers(0, 999))
        right = int(rng.integers(left + 1, 1001))
        assert ours.query(left, right) == theirs.query(left, right)
        if name.startswith("Sum"):
            mass = torch.as_tensor(rng.random(256) * ours.query(0, 1000), dtype=dtype)
            assert torch.equal(
                torch.as_tensor(ours.scan_lower_bound(mass)), torch.as_tensor(theirs.scan_lower_bound(mass))
            )
    everything = torch.arange(1000)
    assert torch.equal(torch.as_tensor(ours[everything]), torch.as_tensor(theirs[everything]))


@needs_compiled
def test_a_prioritized_replay_samples_the_same_batches_with_either_trees(monkeypatch):
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import prioritized as sampler_module

    def batches(trees) -> list[torch.Tensor]:
        for name in TREES:
            monkeypatch.setattr(sampler_module, name, getattr(trees, name))
        buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(500),
            priority_key="td_error",
            sampler=PrioritizedSampler(500, alpha=0.6, beta=0.4),
        )
        buffer.extend(TensorDict({"x": torch.arange(400.0)}, batch_size=[400]))
        np.random.seed(0)
        torch.manual_seed(0)
        drawn = []
        for step in range(20):
            batch = buffer.sample(64)
            drawn += [batch["index"], batch["priority_weight"]]
            buffer.update_priority(batch["index"], (batch["x"] % 7 + step).float())
        return drawn

    for a, b in zip(batches(prioritized), batches(compiled_trees()), strict=True):
        assert torch.equal(a, b)
