"""Issue 12, defect 1: prioritized replay needs no runtime compile (a killed build's lock file wedged
every later run). The segment trees match a brute-force reference, the sampler's priorities and
weights are right, replay state round-trips, and a stale torch-extension lock changes nothing."""

import subprocess
import textwrap
import time

import numpy as np
import pytest
import torch
from reliability_helpers import PYTHON, ROOT, subprocess_env

from torchrl_glam.data import prioritized
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.envs import get_environment

PLAYGROUND = get_environment("playground")  # the environment object the library takes


@pytest.mark.parametrize(
    "tree_name", ["SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64"]
)
@pytest.mark.parametrize("size", [1, 7, 64, 1000])
def test_segment_trees_match_a_brute_force_reference(tree_name, size):
    tree_class = getattr(prioritized, tree_name)
    rng = np.random.default_rng(size)
    tree = tree_class(size)
    is_sum = tree_class.__name__.startswith("Sum")
    identity = 0.0 if is_sum else np.finfo(np.float32 if "32" in tree_class.__name__ else np.float64).max
    leaves = np.full(size, identity, dtype=np.float64)
    assert len(tree) == size and tree.size == size and tree.capacity > size and tree.identity_element == identity
    dtype = torch.float32 if "32" in tree_class.__name__ else torch.float64
    for _ in range(30):
        index = rng.integers(0, size, rng.integers(1, 20))
        value = rng.random(len(index)) * 5 + 0.01
        kind = rng.integers(0, 3)
        if kind == 0:  # tensor indices, tensor values; repeated indices: the last value wins
            tree[torch.as_tensor(index)] = torch.as_tensor(value, dtype=dtype)
        elif kind == 1:  # numpy indices, one value for all
            tree[index] = float(value[0])
            value = np.full(len(index), value[0])
        else:  # one int index
            index, value = index[:1], value[:1]
            tree[int(index[0])] = float(value[0])
        for i, v in zip(index, value):
            leaves[i] = np.asarray(v, dtype=np.float32 if dtype == torch.float32 else np.float64)
        assert np.allclose(tree[np.arange(size)], leaves)
        assert torch.allclose(tree[torch.arange(size)].double(), torch.as_tensor(leaves))
        left = int(rng.integers(0, size))
        right = int(rng.integers(left + 1, size + 1))
        reduce = np.sum if is_sum else np.min
        assert tree.query(left, right) == pytest.approx(reduce(leaves[left:right]), rel=1e-5)
        assert tree.query(0, size) == pytest.approx(reduce(leaves), rel=1e-5)
        if is_sum:
            total = leaves.sum()
            mass = rng.random(50) * total * 0.999
            expected = np.searchsorted(np.cumsum(leaves), mass, side="left")
            found = tree.scan_lower_bound(torch.as_tensor(mass, dtype=dtype))
            # float32 prefix sums differ from float64 ones only next to a boundary
            assert (found.numpy() == expected).mean() > 0.9 and np.abs(found.numpy() - expected).max() <= 1
            assert tree.scan_lower_bound(total * 2) == size  # past the total: size, as in torchrl
    copy = pickle_round_trip(tree)
    assert np.array_equal(copy[np.arange(size)], tree[np.arange(size)]) and copy.query(0, size) == tree.query(0, size)


def pickle_round_trip(tree):
    import pickle

    return pickle.loads(pickle.dumps(tree))


def test_sampler_priorities_and_weights_follow_their_definition():
    prioritized.ensure_prioritized_replay()
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer

    alpha, beta, eps = 0.6, 0.4, 1e-6
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        priority_key="td_error",
        sampler=PrioritizedSampler(100, alpha=alpha, beta=beta, eps=eps),
    )
    buffer.extend(TensorDict({"x": torch.arange(10.0)}, batch_size=[10]))
    priority = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0, 1.0])
    buffer.update_priority(torch.arange(10), priority)
    np.random.seed(0)
    batch = buffer.sample(4000)
    counts = torch.bincount(batch["index"], minlength=10).double()
    p = (priority.double() + eps) ** alpha
    assert torch.allclose(counts / 4000, p / p.sum(), atol=0.02)
    expected_weight = (p[batch["index"]] / p.min()) ** -beta
    assert torch.allclose(batch["priority_weight"].double(), expected_weight, rtol=1e-4)


def test_replay_state_dict_round_trip_samples_the_same():
    def filled():
        replay = GoalReplay(capacity=50, strategy="uniform", environment=PLAYGROUND)
        from tensordict import TensorDict

        replay.extend(
            TensorDict({"goal_id": torch.arange(30), "relabeled": torch.zeros(30, dtype=torch.bool)}, batch_size=[30])
        )
        return replay

    replay = filled()
    batch = replay.sample(8)
    replay.update_priority(batch, torch.arange(8.0) + 1)
    state = replay.state_dict()
    restored = GoalReplay(capacity=50, strategy="uniform", environment=PLAYGROUND)
    restored.load_state_dict(state)
    assert torch.equal(replay.priorities()["all"], restored.priorities()["all"])
    np.random.seed(1)
    a = replay.sample(16)["index"]
    np.random.seed(1)
    b = restored.sample(16)["index"]
    assert torch.equal(a, b)


def test_a_stale_torch_extension_lock_does_not_wedge_a_new_run(tmp_path):
    # what a build killed mid-way left behind, in the folder torch's extension builder uses
    extensions = tmp_path / "torch_extensions"
    for folder in ("_torchrl", "py311_cpu/_torchrl"):
        (extensions / folder).mkdir(parents=True)
        (extensions / folder / "lock").write_text("")
    script = textwrap.dedent("""
        import torch
        from tensordict import TensorDict
        from torchrl_glam.data.replay import GoalReplay
        from torchrl_glam.envs import get_environment
        replay = GoalReplay(capacity=100, strategy="uniform", environment=get_environment("playground"))
        replay.extend(TensorDict({"goal_id": torch.arange(10), "relabeled": torch.zeros(10, dtype=torch.bool)},
                                 batch_size=[10]))
        print("sampled", len(replay.sample(4)))
    """)
    start = time.perf_counter()
    try:
        result = subprocess.run(
            [PYTHON, "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env=subprocess_env(TORCH_EXTENSIONS_DIR=str(extensions)),
        )
    except subprocess.TimeoutExpired:
        pytest.fail("building a prioritized replay waited more than 60 s with a stale extension lock present")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sampled 4" in result.stdout and time.perf_counter() - start < 60
