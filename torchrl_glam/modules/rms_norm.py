"""An RMS norm whose backward keeps its input only.

transformers' Llama-family RMS norm computes ``weight * (x * rsqrt(mean(x ** 2) + eps))`` in float32.
Under autograd it saves the float32 copy of its input (a new tensor unless the model is in float32)
and, if the weight is trained, the normalised states. :class:`RecomputedRMSNorm` then saves the
input alone and recomputes the rest in backward (torch's checkpoint over element-wise work: no matrix
product is recomputed); outputs and gradients are the same operations' (tests compare).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from torchrl_glam.modules.swiglu import replace_modules

#: the norm classes whose forward is transformers' ``LlamaRMSNorm.forward``
RMS_NORM_CLASSES = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")


class RecomputedRMSNorm(nn.Module):
    """A Llama-family RMS norm's own weight (same parameter name, so the same state dict) and
    epsilon, recomputed in backward where that saves memory."""

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.weight, self.variance_epsilon = norm.weight, norm.variance_epsilon

    def forward(self, hidden_states: Tensor) -> Tensor:
        # a float32 input with a frozen weight saves nothing but the input already
        saves_more = hidden_states.dtype != torch.float32 or self.weight.requires_grad
        differentiated = hidden_states.requires_grad or self.weight.requires_grad
        if torch.is_grad_enabled() and differentiated and saves_more:
            return checkpoint(self._normalise, hidden_states, use_reentrant=False, preserve_rng_state=False)
        return self._normalise(hidden_states)

    def _normalise(self, hidden_states: Tensor) -> Tensor:
        # transformers' LlamaRMSNorm.forward, operation for operation (the same bits)
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"


def use_recomputed_rms_norms(model: nn.Module) -> int:
    """Replaces ``model``'s Llama-family RMS norms by :class:`RecomputedRMSNorm`; returns how many."""
    return replace_modules(model, RMS_NORM_CLASSES, RecomputedRMSNorm)
