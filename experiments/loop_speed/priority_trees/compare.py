"""TorchRL's compiled priority trees against this package's numpy ones (issue 89), where both load
(torch >= 2.14 with torchrl 0.14.1): one SAC-GLAM replay cycle per iteration on a full prioritized
buffer (extend 32 transitions, sample a batch, update its priorities), alternating the two
implementations, one torch thread. Prints seconds per cycle and the ratio.

    OMP_NUM_THREADS=1 python experiments/loop_speed/priority_trees/compare.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

TREES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64")


def cycle_seconds(trees, capacity: int, batch: int, cycles: int) -> float:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import prioritized as sampler_module

    for name in TREES:
        setattr(sampler_module, name, getattr(trees, name))
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity),
        priority_key="td_error",
        sampler=PrioritizedSampler(capacity, alpha=0.6, beta=0.4),
    )
    buffer.extend(TensorDict({"x": torch.rand(capacity)}, batch_size=[capacity]))
    np.random.seed(0)
    new = TensorDict({"x": torch.rand(32)}, batch_size=[32])
    start = time.perf_counter()
    for _ in range(cycles):
        buffer.extend(new)
        sampled = buffer.sample(batch)
        buffer.update_priority(sampled["index"], sampled["x"] + 0.1)
    return (time.perf_counter() - start) / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torchrl
    import torchrl._torchrl as compiled  # fails where torchrl's extension does not load: nothing to compare

    from torchrl_glam.data import prioritized

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, torchrl {torchrl.__version__}; capacity {args.capacity}, batch {args.batch}")
    results = {"torchrl (compiled)": [], "torchrl_glam (numpy)": []}
    for _ in range(args.rounds):
        for name, trees in zip(results, (compiled, prioritized)):
            results[name].append(cycle_seconds(trees, args.capacity, args.batch, args.cycles))
    for name, seconds in results.items():
        print(f"{name}: {min(seconds) * 1e3:.3f} ms a cycle (rounds: {', '.join(f'{s * 1e3:.3f}' for s in seconds)})")
    ratio = min(results["torchrl_glam (numpy)"]) / min(results["torchrl (compiled)"])
    print(f"numpy / compiled: {ratio:.2f}x the time")


if __name__ == "__main__":
    main()
