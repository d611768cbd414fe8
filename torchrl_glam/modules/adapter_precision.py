"""LoRA adapters of a half-precision LLM computed in its dtype, their weights kept in float32.

peft keeps adapter weights in float32 (AdamW's small steps would round away in bfloat16) and casts
each adapted layer's input to float32 before its adapter. Autograd then saves that float32 copy,
one per adapted layer, although the layers share their input: with LoRA on ``q_proj`` and
``v_proj`` of a bfloat16 decoder, two float32 copies of the attention's input per layer, a quarter
of what a SmolLM2 layer saves for backward. :func:`adapters_in_model_dtype` runs the model under
``torch.autocast`` in its own dtype instead, with peft's cast off (``disable_input_dtype_casting``):
an adapter's matrix product then casts its float32 weight to the model's dtype, as mixed-precision
training does, and saves the shared half-precision input. Gradients still reach the float32 weights.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from torchrl_glam.modules.loading import is_quantized

HALF_PRECISION = (torch.bfloat16, torch.float16)


def adapter_autocast_dtype(model: nn.Module) -> torch.dtype | None:
    """The dtype to run ``model``'s float32 adapters in: that of its embeddings if they are half
    precision and the model (not quantised) has float32 trainable weights; else ``None``."""
    dtype = model.get_input_embeddings().weight.dtype
    if dtype not in HALF_PRECISION:
        return None
    if is_quantized(model):
        return None  # bitsandbytes' layers pick their own compute dtype
    trained = [p for p in model.parameters() if p.requires_grad]
    return dtype if trained and all(p.dtype == torch.float32 for p in trained) else None


@contextlib.contextmanager
def adapters_in_model_dtype(model: nn.Module, dtype: torch.dtype | None):
    """Runs the block with ``model``'s adapters in ``dtype`` (:func:`adapter_autocast_dtype`);
    does nothing for ``None``."""
    if dtype is None:
        yield
        return
    from peft.helpers import disable_input_dtype_casting

    device_type = model.get_input_embeddings().weight.device.type
    with torch.autocast(device_type, dtype=dtype), disable_input_dtype_casting(model):
        yield
