"""Copies a SAC-GLAM run folder's checkpoint to a new folder with some config fields changed, so
that ``--resume`` continues the same run (same replay, weights, optimisers, environments) from
that step under the changed settings: which setting, applied from the step before a collapse,
prevents it.

    python -m experiments.collapse.branch SRC_RUN_DIR DST_RUN_DIR field=value [field=value ...]
    python examples/sac_glam.py --run-dir DST_RUN_DIR --resume --no-progress total_steps=...

A probe for the research record: a resume of the library refuses such changes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig, parse_overrides
from torchrl_glam.training.checkpoint import read_checkpoint, save_checkpoint


def main(argv: list[str]) -> None:
    src, dst, *pairs = argv
    state = read_checkpoint(Path(src) / "checkpoint.pt")
    changes = parse_overrides(pairs)
    config = SACGLAMConfig.from_dict(state["config"]).replace({**changes, "run.run_dir": dst}).validate().to_dict()
    state["config"] = config
    Path(dst).mkdir(parents=True, exist_ok=False)
    save_checkpoint(state, dst)
    if (Path(src) / "evaluations.jsonl").exists():
        shutil.copy(Path(src) / "evaluations.jsonl", Path(dst) / "evaluations.jsonl")
    (Path(dst) / "config.json").write_text(json.dumps(config, indent=2))
    print(f"{dst}: the checkpoint of {src} at its step, with {changes}")


if __name__ == "__main__":
    main(sys.argv[1:])
