"""Segment trees for TorchRL's ``PrioritizedSampler`` where torchrl's compiled extension does not load.

TorchRL keeps replay priorities in C++ segment trees (``torchrl._torchrl``). A torchrl wheel is
built against one torch release; beside another (torchrl 0.14.1 with torch 2.13 here) the
extension fails to load and ``PrioritizedSampler`` raises "SumSegmentTreeFp32 is not available".
Compiling torchrl's C++ sources at run time would need a compiler and a minute, and
``torch.utils.cpp_extension``'s build lock, shared by every job of a user, wedges every later run
when one is killed mid-build. So nothing is compiled: the four trees below
are written with vectorised numpy operations and offer exactly what ``PrioritizedSampler``
(and ``PrioritizedSliceSampler``) use of ``SumSegmentTreeFp32/Fp64`` and ``MinSegmentTreeFp32/Fp64``
(``torchrl/csrc/segment_tree.h``): ``t[i]``, ``t[i] = v`` (int, numpy or tensor indices, scalar or
per-index values), ``at``, ``update``, ``query(l, r)``, ``scan_lower_bound``, ``size``,
``capacity``, ``identity_element``, ``len`` and pickling. Every internal node is computed as in
the C++ code (``node = op(left child, right child)`` in the tree's own precision), so priorities,
sums and sampled indices are the same numbers. :func:`ensure_prioritized_replay` installs them
only where torchrl's own trees are missing; where the wheel's extension loads, it does nothing.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

_TREES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64")


class _SegmentTree:
    """A binary tree over ``size`` leaves stored in one array (node i has children 2i and 2i+1).

    numpy inside (its per-call overhead is a few times lower than torch's on these small index
    arrays); torch tensors in and out where the C++ class takes and gives them."""

    dtype: np.dtype
    _identity: float

    def __init__(self, size: int) -> None:
        size = int(size)
        if size < 1:
            raise ValueError(f"a segment tree needs at least one leaf, got size={size}")
        capacity = 1
        while capacity <= size:  # as segment_tree.h: the smallest power of two above size
            capacity <<= 1
        self._size, self._capacity = size, capacity
        self._values = np.full(2 * capacity, self._identity, dtype=self.dtype)

    # ---- what the C++ class exposes
    @property
    def size(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def identity_element(self) -> float:
        return self._identity

    def __len__(self) -> int:
        return self._size

    def _op(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _index(index) -> np.ndarray:
        if isinstance(index, torch.Tensor):
            index = index.detach().cpu().numpy()
        return np.asarray(index, dtype=np.int64).reshape(-1)

    def at(self, index):
        """Leaf values: a float for an int, a numpy array for an array, a tensor for a tensor."""
        if isinstance(index, numbers.Integral):
            return float(self._values[int(index) | self._capacity])
        leaves = self._values[self._index(index) | self._capacity]
        if isinstance(index, torch.Tensor):
            return torch.from_numpy(leaves).reshape(index.shape)
        return leaves.reshape(np.shape(index))

    __getitem__ = at

    def update(self, index, value) -> None:
        """Sets leaves (a value per index, or one value for all) and recomputes their ancestors."""
        if isinstance(index, numbers.Integral):
            index = [int(index)]
        index = self._index(index)
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        value = np.asarray(value, dtype=self.dtype).reshape(-1)
        if value.size == 1:
            value = np.broadcast_to(value, index.shape)
        elif value.size != index.size:
            raise ValueError(f"{value.size} values for {index.size} indices")
        if index.size == 0:
            return
        if index.min() < 0 or index.max() >= self._capacity:
            raise IndexError(f"segment tree index out of range [0, {self._capacity})")
        # the C++ tree applies updates in order: with repeated indices the last value wins
        unique, first_from_end = np.unique(index[::-1], return_index=True)
        nodes = unique | self._capacity
        values = self._values
        values[nodes] = value[::-1][first_from_end]
        while nodes[0] > 1:  # one level up at a time: a parent is a pure function of its children,
            nodes = nodes >> 1  # so a parent listed twice is written twice with the same value
            values[nodes] = self._op(values[nodes << 1], values[(nodes << 1) | 1])

    __setitem__ = update

    def _query_one(self, left: int, right: int) -> float:
        values, capacity = self._values, self._capacity
        if left <= 0 and right >= self._size:
            return float(values[1])
        result = self.dtype.type(self._identity)
        left, right = left | capacity, right | capacity
        while left < right:  # the same reduction order as segment_tree.h, hence the same rounding
            if left & 1:
                result = self._op(result, values[left])
                left += 1
            if right & 1:
                right -= 1
                result = self._op(result, values[right])
            left >>= 1
            right >>= 1
        return float(result)

    def query(self, left, right):
        """The reduction over leaves [left, right): a float, or one per pair of an array/tensor."""
        if isinstance(left, numbers.Integral) and isinstance(right, numbers.Integral):
            return self._query_one(int(left), int(right))
        lefts, rights = self._index(left), self._index(right)
        out = np.array([self._query_one(int(a), int(b)) for a, b in zip(lefts, rights)], dtype=self.dtype)
        if isinstance(left, torch.Tensor):
            return torch.from_numpy(out).reshape(left.shape)
        return out.reshape(np.shape(left))

    # ---- pickling and deepcopy (the sampler's state_dict deep-copies its trees): the leaves
    def __getstate__(self) -> dict:
        return {"size": self._size, "leaves": self._values[self._capacity : self._capacity + self._size].copy()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["size"])
        self.update(np.arange(state["size"]), state["leaves"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self._size})"


class _SumSegmentTree(_SegmentTree):
    _identity = 0.0

    def _op(self, left, right):
        return left + right

    def scan_lower_bound(self, value):
        """The smallest leaf index whose prefix sum reaches ``value`` (``size`` when past the total)."""
        scalar = isinstance(value, numbers.Real)
        if isinstance(value, torch.Tensor):
            mass = value.detach().cpu().numpy()
        else:
            mass = np.asarray(value)
        shape = mass.shape
        mass = mass.astype(self.dtype).reshape(-1)  # the C++ overloads take the tree's precision
        values, capacity = self._values, self._capacity
        past_end = mass > values[1]
        node = np.ones(mass.shape, dtype=np.int64)
        while capacity > 1 and node.size and node[0] < capacity:  # every node descends one level
            node <<= 1
            left = values[node]
            go_right = mass > left
            mass = np.where(go_right, mass - left, mass)
            node |= go_right
        index = np.where(past_end, self._size, node ^ capacity)
        if scalar:
            return int(index[0])
        if isinstance(value, torch.Tensor):
            return torch.from_numpy(index).reshape(shape)
        return index.reshape(shape)


class _MinSegmentTree(_SegmentTree):
    def _op(self, left, right):
        return np.minimum(left, right)


class SumSegmentTreeFp32(_SumSegmentTree):
    dtype, _identity = np.dtype(np.float32), 0.0


class SumSegmentTreeFp64(_SumSegmentTree):
    dtype, _identity = np.dtype(np.float64), 0.0


class MinSegmentTreeFp32(_MinSegmentTree):
    dtype, _identity = np.dtype(np.float32), float(np.finfo(np.float32).max)


class MinSegmentTreeFp64(_MinSegmentTree):
    dtype, _identity = np.dtype(np.float64), float(np.finfo(np.float64).max)


def ensure_prioritized_replay() -> None:
    """Makes ``torchrl.data.PrioritizedSampler`` usable: installs the trees above where torchrl's
    compiled ones did not load (its module globals are what the sampler builds its trees from)."""
    from torchrl.data.replay_buffers.samplers import prioritized

    for name in _TREES:
        if getattr(prioritized, name) is None:
            setattr(prioritized, name, globals()[name])
