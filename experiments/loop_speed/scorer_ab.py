"""The LLM scorer of this tree against the scorer of an older commit, in one process, on the offline
tiny T5 (session 23: the prefix-tree decoding of the candidates against fd56c8f).

Both scorers wrap the same model; they alternate round by round (7 rounds, CPU seconds, one
thread) on Playground-Text batches (``benchmarks/scoring.py``'s ``playground_batch``):

- "update-like": forward with gradient, backward, forward without gradient, on 128 prompts
  (what one SAC-GLAM update asks of the scorer);
- "acting": one forward without gradient, on 32 prompts (one step of the ``cpu`` preset's 32
  environments);

with 6 objects (8 candidates: the full task set's scenes) and 3 (5 candidates: the simplified
set's). ``--t5-small``: a t5-small-shaped T5 (random weights, ``benchmarks/scoring.py``'s shape)
instead, 32 prompts in both modes and 3 rounds (it is ~80x the tiny T5's work).

    python experiments/loop_speed/scorer_ab.py [COMMIT] [--t5-small]     # default fd56c8f
"""

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from torchrl_glam.benchmarks.scoring import T5_SMALL_SHAPE, playground_batch
from torchrl_glam.modules import scoring
from torchrl_glam.modules.loading import LLMConfig, load_llm
from torchrl_glam.offline.tiny import build_tiny_model


def module_at(commit: str, path: str = "torchrl_glam/modules/scoring.py"):
    """``path``, a module of this repository, as it was at ``commit``, imported under another name."""
    root = Path(__file__).resolve().parents[2]
    source = subprocess.run(
        ["git", "-C", str(root), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    name = f"{Path(path).stem}_at_commit"
    copy = Path(tempfile.mkdtemp()) / f"{name}.py"
    copy.write_text(source)
    spec = importlib.util.spec_from_file_location(name, copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(commit: str = "fd56c8f", t5_small: bool = False) -> None:
    torch.set_num_threads(1)
    rounds, update_prompts = (3, 32) if t5_small else (7, 128)
    if t5_small:
        path = build_tiny_model(Path(tempfile.mkdtemp()) / "t5-small-shaped", "t5", **T5_SMALL_SHAPE)
        llm = load_llm(LLMConfig(str(path)))
    else:
        llm = load_llm(LLMConfig("offline:tiny-t5-pretrained"))
    scorers = {
        commit: module_at(commit).LLMScorer(llm.model, llm.tokenizer, True),
        "this tree": scoring.LLMScorer(llm.model, llm.tokenizer, True),
    }

    def update_like(scorer, batch):
        scores, action_hidden, prompt_hidden = scorer(*batch)
        (scores.sum() + action_hidden.square().sum() + prompt_hidden.sum()).backward()
        with torch.no_grad():
            scorer(*batch)

    def acting(scorer, batch):
        with torch.no_grad():
            scorer(*batch)

    print(
        f"{'t5-small-shaped T5' if t5_small else 'tiny T5'}: CPU ms, median of {rounds} alternating rounds, "
        f"one thread; ratio = {commit} / this tree"
    )
    for objects in (6, 3):
        for name, work, prompts in (("update-like", update_like, update_prompts), ("acting", acting, 32)):
            batch = playground_batch(prompts, objects)
            times = {key: [] for key in scorers}
            for round_ in range(rounds):
                for key in list(scorers) if round_ % 2 else list(scorers)[::-1]:
                    start = time.process_time()
                    work(scorers[key], batch)
                    times[key].append(time.process_time() - start)
            before, after = (statistics.median(times[key]) for key in scorers)
            print(
                f"{objects} objects, {name:<11} {prompts:>3} prompts: {commit} {before * 1e3:6.1f}  "
                f"this tree {after * 1e3:6.1f}  ratio {before / after:.2f}"
            )


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--t5-small"]
    main(*arguments, t5_small="--t5-small" in sys.argv[1:])
