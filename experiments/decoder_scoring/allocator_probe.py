"""Where a lean SmolLM2 scorer update's peak memory goes: live bytes against glibc's heap.

    OMP_NUM_THREADS=1 python experiments/decoder_scoring/allocator_probe.py [reuse|default|mmap4]

One process, one policy for glibc's malloc: ``reuse`` (what training runs set,
``training.runtime.reuse_freed_memory``), ``default`` (glibc's own), ``mmap4`` (every block of 4 MB
or more mapped apart and unmapped when freed). Loads SmolLM2-135M with LoRA rank 16, builds the
scorer_update benchmark's batch (32 full-task-set observations and their next ones), runs one update
in that benchmark's order and prints, after the forward with gradient, the bytes autograd saved
(activations only, parameters left out), malloc's bytes in use and its free bytes inside the heap
(``mallinfo2``), then the update's peak resident memory above the loaded model and the CPU seconds of
two more updates with the minor page faults they took.
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

import torch

from torchrl_glam.benchmarks.observations import observations_pair
from torchrl_glam.benchmarks.scorer_update import memory_mb
from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
from torchrl_glam.training.runtime import reuse_freed_memory

M_MMAP_THRESHOLD = -3  # glibc's malloc.h


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def main(policy: str) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    if policy == "reuse":
        reuse_freed_memory()
    elif policy == "mmap4":
        libc.mallopt(M_MMAP_THRESHOLD, 4 << 20)
    elif policy != "default":
        raise SystemExit(f"unknown policy {policy!r}: reuse, default or mmap4")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    llm = load_llm(LLMConfig("smollm2-135m", lora_rank=16))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
    observation, following = observations_pair(32)
    parameters = {p.untyped_storage().data_ptr() for p in llm.model.parameters()}
    saved: dict[int, int] = {}

    def keep(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    def update(count_saved: bool = False) -> None:
        for parameter in scorer.parameters():
            parameter.grad = None
        with torch.autograd.graph.saved_tensors_hooks(keep if count_saved else (lambda t: t), lambda t: t):
            scores, action_hidden, prompt_hidden = scorer(*observation)
        if count_saved:
            info = libc.mallinfo2()
            print(
                f"after the forward with gradient: saved activations {sum(saved.values()) / 2**20:.0f} MB; "
                f"malloc in use {(info.uordblks - loaded_in_use) / 2**20:.0f} MB above load, "
                f"free inside the heap {info.fordblks / 2**20:.0f} MB"
            )
        with torch.no_grad():
            scorer(*following)
        (scores.sum() + action_hidden.square().mean() + prompt_hidden.square().mean()).backward()

    loaded, loaded_in_use = memory_mb("VmRSS"), libc.mallinfo2().uordblks
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    update(count_saved=True)
    cpu = []
    faults_before = int(Path("/proc/self/stat").read_text().split()[9])
    for _ in range(2):
        start = time.process_time()
        update()
        cpu.append(time.process_time() - start)
    faults = int(Path("/proc/self/stat").read_text().split()[9]) - faults_before
    print(
        f"{policy}: peak {memory_mb('VmHWM') - loaded:.0f} MB above load; update CPU s "
        f"{', '.join(f'{c:.1f}' for c in cpu)}; {faults:,} minor page faults in those two"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reuse")
