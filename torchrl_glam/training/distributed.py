"""Data-parallel training across processes (several GPUs or nodes, or gloo on CPU).

Each rank runs its own share of the environments and its own replay; the gradients of the LLM,
the heads and alpha are averaged across ranks after each backward, so every rank takes the same
optimiser step and the weights stay identical (the paper's 4 LLM instances in data parallel).

Why not ``torch.nn.parallel.DistributedDataParallel``: it all-reduces through hooks on one
wrapped module whose single forward feeds the backward. A SAC-GLAM update runs the scorer twice
(observations with gradient, next observations without) and evaluates the heads through
``DiscreteSACLoss``'s functional, vmapped parameters, which DDP's hooks never see. Averaging the
gradients of the trainable parameters after backward is the same arithmetic, explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
import torch.distributed as dist


def init_distributed(device: str = "cpu") -> tuple[int, int]:
    """(rank, world size) from the ``env://`` variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    exported by ``torchrun`` or by the Slurm launcher); a single process gives (0, 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if str(device).startswith("cuda") and dist.is_nccl_available() else "gloo"
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size()


def rank_share(cfg, name: str, world: int) -> int:
    """One rank's share of a config field counted over all ranks (``num_envs``, ``batch_size``,
    ``learning_starts``, ``minibatch_size``): every script and updater divides here, so a world of
    N gives each rank 1/N of each of them."""
    return cfg.get(name) // world


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def average_gradients(parameters: Iterable[torch.Tensor]) -> None:
    """All-reduces and averages the gradients of ``parameters`` over the ranks (in one flat buffer)."""
    if not is_distributed():
        return
    params = [p for p in parameters if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[offset : offset + n].view_as(g).clone()
        offset += n


def broadcast_parameters(parameters: Iterable[torch.Tensor], src: int = 0) -> None:
    """Copies rank ``src``'s values of ``parameters`` to every rank."""
    if not is_distributed():
        return
    with torch.no_grad():
        for p in parameters:
            dist.broadcast(p.data, src=src)


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_true(flag: bool) -> bool:
    """Whether ``flag`` holds on every rank (so that all ranks take the same branch)."""
    if not is_distributed():
        return bool(flag)
    value = torch.tensor([int(bool(flag))])
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())


def any_true(flag: bool) -> bool:
    """Whether ``flag`` holds on at least one rank."""
    return not all_true(not flag)


def all_max(value: int) -> int:
    """The largest ``value`` over the ranks (e.g. a number of minibatches every rank must run)."""
    if not is_distributed():
        return int(value)
    tensor = torch.tensor([int(value)])
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())
