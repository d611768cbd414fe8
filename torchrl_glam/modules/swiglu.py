"""A gated SiLU MLP whose backward keeps two of its three [tokens, intermediate] activations.

Llama-family MLPs compute ``down(silu(gate(x)) * up(x))``; autograd saves ``gate(x)`` for the SiLU
and both factors of the product, three [tokens, intermediate] tensors per layer, the largest part of
a lean SmolLM2 update's memory. :class:`SwiGLU` saves the two projections only and recomputes the
SiLU in backward (an element-wise op: no matrix product is recomputed); outputs and gradients are
the same operations' (tests compare). torch has no fused op for it, hence the autograd function.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

#: the attribute by which ``causal_scoring.rows_read_from`` tells a :class:`SwiGLU` (and an attention
#: module) to compute its rows from that column on only
ROWS_FROM = "glam_rows_from"
#: the MLP classes whose forward is ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``
GATED_MLP_CLASSES = ("LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP")


class _SiLUProduct(torch.autograd.Function):
    """``silu(gate) * up``, saving ``gate`` and ``up`` only."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor) -> Tensor:
        ctx.save_for_backward(gate, up)
        return nn.functional.silu(gate).mul_(up)  # in place: one [tokens, intermediate] buffer, not two

    @staticmethod
    @once_differentiable  # a second derivative through it raises instead of being wrong
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        gate, up = ctx.saved_tensors
        with torch.enable_grad():
            # torch's own SiLU backward, for the same gradient bits as the unfused MLP
            leaf = gate.detach().requires_grad_()
            activation = nn.functional.silu(leaf)
        grad_gate = torch.autograd.grad(activation, leaf, grad * up)[0] if ctx.needs_input_grad[0] else None
        grad_up = grad * activation.detach() if ctx.needs_input_grad[1] else None
        return grad_gate, grad_up


class SwiGLU(nn.Module):
    """A Llama-family MLP's own projections (same parameter names, so the same state dict and
    adapters) with :class:`_SiLUProduct` in between; rows before its ``ROWS_FROM`` attribute (0: none)
    are not computed."""

    def __init__(self, mlp: nn.Module):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        setattr(self, ROWS_FROM, 0)  # rows (dim 1) before this one are not computed and are 0

    def forward(self, x: Tensor) -> Tensor:
        start = getattr(self, ROWS_FROM)
        if start:
            return nn.functional.pad(self._project(x[:, start:]), (0, 0, start, 0))
        return self._project(x)

    def _project(self, x: Tensor) -> Tensor:
        return self.down_proj(_SiLUProduct.apply(self.gate_proj(x), self.up_proj(x)))


def use_swiglu(model: nn.Module) -> int:
    """Replaces ``model``'s SiLU-gated Llama-family MLPs by :class:`SwiGLU`; returns how many."""
    if getattr(model.config, "hidden_act", None) != "silu":
        return 0
    return replace_modules(model, GATED_MLP_CLASSES, SwiGLU)


def replace_modules(model: nn.Module, class_names: tuple[str, ...], replacement) -> int:
    """Replaces every submodule of ``model`` whose class is named in ``class_names`` by
    ``replacement(submodule)``; returns how many."""
    found = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child).__name__ in class_names
    ]
    for parent, name, child in found:
        setattr(parent, name, replacement(child))
    return len(found)
