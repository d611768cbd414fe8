"""Prioritized replay's segment trees: one update and one sample of a batch, at the paper's capacity.

    python -m torchrl_glam.benchmarks.replay [--compiled PATH/_torchrl.so]

Times :mod:`torchrl_glam.data.prioritized`'s trees and, when torchrl's own compiled ones load
(``torchrl._torchrl``, or an extension built by hand and passed with ``--compiled``), those too,
in the same run, and prints their ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np
import torch

from torchrl_glam.data import prioritized


def time_trees(module, capacity: int, batch: int, repeats: int) -> float:
    """Seconds per (update of ``batch`` priorities in a sum and a min tree + a sample of ``batch``)."""
    sum_tree, min_tree = module.SumSegmentTreeFp32(capacity), module.MinSegmentTreeFp32(capacity)
    everything, values = torch.arange(capacity), torch.rand(capacity)
    sum_tree[everything], min_tree[everything] = values, values
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(repeats):
        index, priority = torch.randint(0, capacity, (batch,)), torch.rand(batch)
        sum_tree[index], min_tree[index] = priority, priority
        total, _ = sum_tree.query(0, capacity), min_tree.query(0, capacity)
        found = sum_tree.scan_lower_bound(rng.uniform(0.0, total, batch))
        sum_tree[torch.as_tensor(found)]
    return (time.perf_counter() - start) / repeats


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--compiled", default=None, help="a torchrl _torchrl extension built for this torch")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    candidates = {"torchrl_glam (numpy)": prioritized}
    if args.compiled:
        spec = importlib.util.spec_from_file_location("_torchrl", args.compiled)
        compiled = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compiled)
        candidates["torchrl compiled"] = compiled
    elif importlib.util.find_spec("torchrl._torchrl") is not None:
        try:
            import torchrl._torchrl as compiled

            candidates["torchrl compiled"] = compiled
        except ImportError as err:
            print(f"torchrl's compiled trees do not load here ({err})")
    results = {name: time_trees(module, args.capacity, args.batch, args.repeats) for name, module in candidates.items()}
    for name, seconds in results.items():
        print(f"{name}: {seconds * 1e3:.3f} ms per update + sample of {args.batch} (capacity {args.capacity})")
    if len(results) == 2:
        ours, theirs = results.values()
        print(f"ratio torchrl_glam / compiled: {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
