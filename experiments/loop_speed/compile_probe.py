"""torch.compile of the T5 encoder in the scorer (session 26): compile time, recompiles over prompt
lengths, and the update-like pass (forward with gradient, backward, forward without; 128 full-set
prompts, CPU ms, one thread, median of 12 passes over four batches) against the eager encoder.

    python experiments/loop_speed/compile_probe.py eager|encoder
"""

import statistics
import sys
import time

import torch

from torchrl_glam.benchmarks.scoring import playground_batch
from torchrl_glam.modules import scoring
from torchrl_glam.modules.loading import LLMConfig, load_llm
from torchrl_glam.training.runtime import reuse_freed_memory


def uneven_batch(seed, most_grown):
    """128 prompts with 0 to ``most_grown`` grown objects: the batch's longest prompt grows with it."""
    prompts, candidates, mask = playground_batch(128, 6, seed=seed)
    prompts = [
        p.replace(
            "You have grown: nothing",
            "You have grown: " + (", ".join(["blue tree"] * (i % (most_grown + 1))) or "nothing"),
        )
        for i, p in enumerate(prompts)
    ]
    return prompts, candidates, mask


def main(mode):
    torch.set_num_threads(1)
    reuse_freed_memory()
    llm = load_llm(LLMConfig("offline:tiny-t5-pretrained"))
    scorer = scoring.LLMScorer(llm.model, llm.tokenizer, True)
    batches = [uneven_batch(seed, most_grown) for seed, most_grown in ((3, 1), (4, 2), (5, 3), (6, 4))]

    def update_like(batch):
        scores, action_hidden, prompt_hidden = scorer(*batch)
        (scores.sum() + action_hidden.square().sum() + prompt_hidden.sum()).backward()
        with torch.no_grad():
            scorer(*batch)

    if mode == "encoder":
        llm.model.encoder = torch.compile(llm.model.encoder, dynamic=True)
    for i, batch in enumerate(batches):  # the first pass on each prompt length: compiles or recompiles
        start = time.time()
        update_like(batch)
        longest = max(len(ids) for ids in llm.tokenizer(batch[0])["input_ids"])
        print(f"first pass on batch {i} (prompts of up to {longest} tokens): {time.time() - start:.1f} s")
    times = []
    for round_ in range(12):
        start = time.process_time()
        update_like(batches[round_ % 4])
        times.append(time.process_time() - start)
    print(f"{mode}: update-like pass, median {statistics.median(times) * 1e3:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
