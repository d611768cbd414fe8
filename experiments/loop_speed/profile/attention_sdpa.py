"""The tiny T5's encoder self-attention at a TextWorld update's shape, the package's eager product
(``torchrl_glam.modules.attention.attend``) against torch's ``scaled_dot_product_attention``.

    OMP_NUM_THREADS=1 python experiments/loop_speed/profile/attention_sdpa.py

Shape: a batch of 128 prompts (the cpu presets' batch_size), 4 heads of 16 (the tiny T5), 240 tokens
(TextWorld's longest prompts with history=2), a T5 position bias [1, h, L, L] and a padding mask
[b, 1, 1, L] (prompt lengths drawn from 100 to 240). Two repetitions each, the second printed.
"""

import time

import torch
from torch import nn
from torch.nn import functional

from torchrl_glam.modules.attention import attend

torch.manual_seed(0)
torch.set_num_threads(1)
b, h, L, d = 128, 4, 240, 16
q, k, v = (torch.randn(b, h, L, d, requires_grad=True) for _ in range(3))
bias = torch.randn(1, h, L, L)
lengths = torch.randint(100, L, (b,))
mask = torch.zeros(b, L).masked_fill(torch.arange(L)[None] >= lengths[:, None], torch.finfo(torch.float32).min)
mask = mask[:, None, None, :]
module = nn.Module().eval()


def eager():
    return attend(module, q, k, v, bias, mask, 1.0, 0.0)


def sdpa():
    return functional.scaled_dot_product_attention(q, k, v, attn_mask=bias + mask, scale=1.0)


for name, attention in (("eager (attend)", eager), ("sdpa", sdpa)):
    for _ in range(2):
        start = time.perf_counter()
        out = attention()
        forward = time.perf_counter() - start
        start = time.perf_counter()
        out.sum().backward()
        backward = time.perf_counter() - start
        q.grad = k.grad = v.grad = None
    print(f"{name:16s} forward {forward:.3f} s, backward {backward:.3f} s")
with torch.no_grad():
    difference = (eager() - sdpa()).abs().max().item()
print(f"largest difference of the outputs: {difference:.2e} (random q, k of unit scale)")
print(f"torch {torch.__version__}")
