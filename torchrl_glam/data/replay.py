"""Prioritized replay of n-step transitions, with the batch compositions of App. E.

Transitions are tensors only (the compact state of ``episodes.py``, as produced by
``nstep.py``): prompts are rendered from ``goal_id`` and the state when a batch is sampled, so the
buffers stay small, can be saved in a checkpoint, and never hold text.

Batch compositions (``strategy``):

* ``"ratio"`` (the paper): a fixed share of each batch from relabeled transitions (``her_ratio``,
  0.5) and the rest from the environment's own, each from its own prioritized buffer;
* ``"prior"`` (App. E): one buffer per goal type, each batch drawing the goal types in the task
  set's proportions (relabeled and environment transitions together);
* ``"uniform"``: one buffer.

Counts per buffer are exact (largest remainder), over the buffers that hold data. Each buffer is
a TorchRL ``TensorDictReplayBuffer`` with a ``PrioritizedSampler``; after a loss, TD errors come
back through :meth:`GoalReplay.update_priority`. TorchRL's ``ReplayBufferEnsemble`` draws the
buffer of each sample at random, so its batch composition is only right on average; exact counts
are why this small composer exists.
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import LazyTensorStorage, PrioritizedSampler, RandomSampler, TensorDictReplayBuffer

from torchrl_glam.data.prioritized import ensure_prioritized_replay
from torchrl_glam.envs import TextEnvironment, require_environment

STRATEGIES = ("ratio", "prior", "uniform")
WEIGHT_NORMS = ("buffer", "part")
_TREES = ("_sum_tree", "_min_tree")  # the segment trees' entries in a PrioritizedSampler's state_dict


def _tree_values(tree, size: int) -> torch.Tensor:
    """A segment tree's leaves as a tensor."""
    return tree[torch.arange(size)].clone()


class ReplayMemoryError(MemoryError):
    """Replay buffers that would not fit in this machine's available memory."""


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux's MemAvailable); ``None`` elsewhere."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(what: str, needed: int, fix: str) -> None:
    """Raises a :class:`ReplayMemoryError` with the estimate when ``needed`` bytes exceed what is
    available: refused before allocating, instead of an allocation failing (or swapping) later."""
    available = available_memory()
    if available is not None and needed > available:
        raise ReplayMemoryError(
            f"{what} need about {needed / 2**30:.1f} GiB but this machine has {available / 2**30:.1f} GiB "
            f"available: {fix}"
        )


def split_counts(batch_size: int, weights: list[float]) -> list[int]:
    """Integer counts summing to ``batch_size`` in proportion to ``weights`` (largest remainder)."""
    weights = np.asarray(weights, dtype=float)
    if weights.sum() <= 0:
        raise ValueError("no buffer holds data to sample from")
    exact = batch_size * weights / weights.sum()
    counts = np.floor(exact).astype(int)
    remainder = batch_size - counts.sum()
    counts[np.argsort(-(exact - counts), kind="stable")[:remainder]] += 1
    return counts.tolist()


class GoalReplay:
    """Replay buffers of n-step transitions and the batch composition that samples them.

    Args:
        capacity (int): transitions per buffer (the paper: 100,000).
        strategy (str): "ratio", "prior" or "uniform" (see the module docstring).
        her_ratio (float): with "ratio", the share of relabeled transitions in a batch.
        goal_type_weights (list[float] | None): with "prior", the proportion of each goal type (one number per type of
            the environment's ``goal_types``, in that order); :meth:`type_proportions` gives those
            of a task set.
        prioritized (bool): TD-error prioritized sampling (``False``: uniform within each buffer).
        alpha, beta, eps (float): the ``PrioritizedSampler`` parameters (:meth:`set_beta` changes beta).
        weight_norm (str): how importance weights are normalised. "buffer" (TorchRL's): by the buffer's
            own smallest priority, so the share of the weighted loss each buffer's part of a batch
            carries depends on its priorities; "part": each buffer's part of a batch scaled to mean
            weight 1, so that it carries exactly its share of the batch (``her_ratio`` for the
            relabeled part), the weights within a part keeping their ratios.
        environment (TextEnvironment): the :class:`~torchrl_glam.envs.protocol.TextEnvironment`, for goal types.
    """

    def __init__(
        self,
        capacity: int = 100_000,
        strategy: str = "ratio",
        her_ratio: float = 0.5,
        goal_type_weights: list[float] | None = None,
        prioritized: bool = True,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        weight_norm: str = "buffer",
        *,
        environment: TextEnvironment,
    ) -> None:
        if weight_norm not in WEIGHT_NORMS:
            raise ValueError(f"weight_norm={weight_norm!r} is not a normalisation; choose one of {WEIGHT_NORMS}")
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy={strategy!r} is not a batch composition; choose one of {STRATEGIES}")
        if not 0.0 <= her_ratio <= 1.0:
            raise ValueError(f"her_ratio={her_ratio} must be in [0, 1]")
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be at least 1")
        self.environment = require_environment(environment)
        self.catalogue = self.environment.catalogue
        goal_types = self.environment.goal_types
        self.strategy, self.her_ratio, self.weight_norm = strategy, her_ratio, weight_norm
        if strategy == "prior":
            if goal_type_weights is None or len(goal_type_weights) != len(goal_types):
                raise ValueError(
                    f"strategy='prior' needs goal_type_weights, one per goal type {goal_types}: "
                    "GoalReplay.type_proportions(goal_ids) gives those of a task set"
                )
            self.names = list(goal_types)
            self.weights = [float(w) for w in goal_type_weights]
        elif strategy == "ratio":
            self.names, self.weights = ["environment", "relabeled"], [1.0 - her_ratio, her_ratio]
        else:
            self.names, self.weights = ["all"], [1.0]
        self.prioritized = prioritized
        self.capacity = capacity
        self._fix = f"lower buffer_capacity={capacity} (the paper: 100000)"
        if prioritized:
            ensure_prioritized_replay()
            # a PrioritizedSampler allocates its sum and min trees at once: two trees of 2 x capacity
            # (rounded up to a power of two) nodes, ~32 bytes per slot as measured here
            slots = 1 << max(int(capacity) - 1, 1).bit_length()
            check_fits(
                f"{len(self.names)} prioritized replay buffers' priority trees", 32 * slots * len(self.names), self._fix
            )
        self._storage_checked = False
        self.buffers = [
            TensorDictReplayBuffer(
                storage=LazyTensorStorage(capacity),
                sampler=PrioritizedSampler(capacity, alpha=alpha, beta=beta, eps=eps)
                if prioritized
                else RandomSampler(),
                priority_key="td_error",
            )
            for _ in self.names
        ]

    @staticmethod
    def type_proportions(goal_ids: np.ndarray, *, environment: TextEnvironment) -> list[float]:
        """The share of each goal type in a task set (the "prior" weights of App. E)."""
        environment = require_environment(environment)
        types = environment.catalogue.goal_type[np.asarray(goal_ids)]
        return [float((types == k).mean()) for k in range(len(environment.goal_types))]

    def _route(self, transitions: TensorDictBase) -> torch.Tensor:
        """The buffer index of each transition."""
        if self.strategy == "ratio":
            return transitions["relabeled"].long()
        if self.strategy == "prior":
            return torch.as_tensor(self.catalogue.goal_type[transitions["goal_id"].cpu().numpy()])
        return torch.zeros(transitions.shape[0], dtype=torch.long)

    def extend(self, transitions: TensorDictBase) -> None:
        """Adds n-step transitions [M] (``nstep.py``), each to its buffer."""
        route = self._route(transitions)
        if not self._storage_checked:  # LazyTensorStorage allocates all its capacity at the first extend
            per_transition = transitions.bytes() / max(transitions.shape[0], 1)
            needed = int(per_transition * self.capacity * len(self.buffers))
            check_fits(f"{len(self.buffers)} replay buffers of {self.capacity} transitions", needed, self._fix)
            self._storage_checked = True
        for i, buffer in enumerate(self.buffers):
            chosen = route == i
            if chosen.any():
                buffer.extend(transitions[chosen])

    def __len__(self) -> int:
        return sum(len(b) for b in self.buffers)

    def sizes(self) -> dict[str, int]:
        return {name: len(b) for name, b in zip(self.names, self.buffers)}

    def sample(self, batch_size: int) -> TensorDictBase:
        """A batch with the exact composition of the strategy, over the buffers that hold data.

        Adds "buffer_id" (which buffer), "index" (its position there) and "priority_weight"
        (importance-sampling weights of the prioritized sampler, 1 when uniform)."""
        weights = [w if len(b) else 0.0 for w, b in zip(self.weights, self.buffers)]
        if sum(weights) <= 0:  # e.g. "ratio" before any relabeled data: use what exists
            weights = [float(len(b) > 0) for b in self.buffers]
        counts = split_counts(batch_size, weights)
        parts = []
        for i, (buffer, count) in enumerate(zip(self.buffers, counts)):
            if count == 0:
                continue
            part = buffer.sample(count)
            part["buffer_id"] = torch.full((count,), i, dtype=torch.long)
            if "priority_weight" not in part.keys():
                part["priority_weight"] = torch.ones(count)
            elif self.weight_norm == "part":
                part["priority_weight"] = part["priority_weight"] / part["priority_weight"].mean()
            parts.append(part)
        return torch.cat(parts)

    def set_beta(self, beta: float) -> None:
        """The importance-sampling exponent of every buffer's prioritized sampler from now on."""
        if self.prioritized:
            for buffer in self.buffers:
                buffer.sampler.beta = beta

    def update_priority(self, batch: TensorDictBase, td_error: torch.Tensor) -> None:
        """Sets the priorities of a sampled batch from its TD errors (absolute values)."""
        if not self.prioritized:
            return
        td_error = td_error.detach().abs().reshape(-1).cpu()
        for i, buffer in enumerate(self.buffers):
            chosen = batch["buffer_id"] == i
            if chosen.any():
                buffer.update_priority(batch["index"][chosen], td_error[chosen])

    def priorities(self) -> dict[str, torch.Tensor]:
        """Each buffer's sampling weight per slot, by buffer name: what the prioritized sampler
        holds, ``(|TD error| + eps) ** alpha`` (0 for an empty slot). Empty when not prioritized."""
        if not self.prioritized:
            return {}
        return {
            name: _tree_values(buffer.sampler.state_dict()["_sum_tree"], buffer.sampler.max_size)
            for name, buffer in zip(self.names, self.buffers)
        }

    def state_dict(self) -> dict:
        """Storages, writers and priorities. The priorities are saved as tensors, not as the
        C++ segment-tree objects (whose class depends on which build of torchrl's extension
        loaded), so a checkpoint moves between machines. Only the samplers' public
        ``state_dict``/``load_state_dict`` are used: the trees are entries of their state."""
        buffers = []
        for buffer in self.buffers:
            state = buffer.state_dict()
            if self.prioritized:
                sampler = dict(state["_sampler"])
                for tree in _TREES:
                    sampler[tree] = _tree_values(sampler[tree], buffer.sampler.max_size)
                state["_sampler"] = sampler
            buffers.append(state)
        return {"buffers": buffers, "names": self.names}

    def load_state_dict(self, state: dict) -> None:
        if state["names"] != self.names:
            raise ValueError(f"checkpoint buffers {state['names']} do not match this replay's {self.names}")
        for buffer, buffer_state in zip(self.buffers, state["buffers"]):
            buffer_state = dict(buffer_state)
            if self.prioritized:
                sampler = dict(buffer_state["_sampler"])
                own = buffer.sampler.state_dict()  # copies of this buffer's own (fresh) trees
                for tree in _TREES:
                    values = sampler[tree]
                    own[tree][torch.arange(len(values))] = values
                    sampler[tree] = own[tree]
                buffer_state["_sampler"] = sampler
            buffer.load_state_dict(buffer_state)
