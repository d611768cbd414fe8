"""Test settings shared by every room.

One thread per process: on the 2-core CI machine, two intra-op threads under load were measured
25x slower than one.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
