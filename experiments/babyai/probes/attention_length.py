"""The tiny T5's encoder self-attention at BabyAI-Text's prompt lengths (experiments/babyai/README.md,
session 33): the project's eager attention (``modules/attention.py``) against torch's SDPA, forward
and backward at [64 prompts, 4 heads, L tokens, 16] with a position bias and a padding mask, one
thread. Prompts are ~95 tokens without history and ~220 with ``history=2``. Timed twice: with the
position bias frozen, and with it trained (as in the tiny T5, whose every weight trains): a bias
that needs a gradient sends SDPA on the CPU to its math path.

    OMP_NUM_THREADS=1 python experiments/babyai/probes/attention_length.py
"""

import time

import torch
from torch import nn

from torchrl_glam.modules.attention import attend

BATCH, HEADS, HEAD_DIM = 64, 4, 16


def eager(query, key, value, bias, mask):
    module = nn.Module()  # attend reads only .training (dropout 0 here)
    return attend(module, query, key, value, bias, mask, 1.0, 0.0)


def sdpa(query, key, value, bias, mask):
    return nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=bias + mask, scale=1.0)


def best_seconds(attention, length: int, bias_grad: bool, repeats: int = 5) -> float:
    """The fastest of ``repeats`` forward + backward passes, after one warm-up."""
    query, key, value = (torch.randn(BATCH, HEADS, length, HEAD_DIM, requires_grad=True) for _ in range(3))
    bias = torch.randn(1, HEADS, length, length, requires_grad=bias_grad)
    mask = torch.zeros(BATCH, 1, length, length)
    mask[..., length - 10 :] = -1e9  # ten padding tokens
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        attention(query, key, value, bias, mask).sum().backward()
        times.append(time.perf_counter() - start)
    return min(times[1:])


if __name__ == "__main__":
    torch.set_num_threads(1)
    for bias_grad in (False, True):
        print(f"position bias {'trained' if bias_grad else 'frozen'}")
        for length in (50, 100, 150, 220):
            eager_s, sdpa_s = best_seconds(eager, length, bias_grad), best_seconds(sdpa, length, bias_grad)
            print(f"{length} eager {eager_s * 1e3:.1f} ms  sdpa {sdpa_s * 1e3:.1f} ms  ratio {sdpa_s / eager_s:.2f}")
