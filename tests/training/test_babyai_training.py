"""SAC-GLAM+HER on BabyAI-Text through the training script, chosen by name (``env=babyai``)."""
import json
from pathlib import Path

import pytest

pytest.importorskip("minigrid")

from torchrl_glam.training.checkpoint import load_checkpoint  # noqa: E402
from torchrl_glam.training.scripts.sac_glam import main  # noqa: E402


def test_the_smoke_babyai_preset_trains_and_relabels(tmp_path):
    run_dir = tmp_path / "run"
    code = main(["--preset", "smoke_babyai", "total_steps=80", "max_steps=5", "learning_starts=16",
                 "update_frequency=16", "eval_every=80", "checkpoint_every=80", "log_every=40", "eval_episodes=4", "loggers=csv",
                 "--run-dir", str(run_dir), "--no-progress"])
    assert code == 0
    assert json.loads((run_dir / "config.json").read_text())["env"] == "babyai"
    evaluation = [json.loads(line) for line in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert {e["set"] for e in evaluation} == {"train", "held_out"}  # held_out: MixedTestLocal
    state = load_checkpoint(Path(run_dir))
    assert state["updater"]["updates"] > 0
    relabeled = (run_dir / "logs" / "scalars" / "batch" / "relabeled_share.csv").read_text().split()[-1]
    assert float(relabeled.split(",")[1]) > 0  # the partner's reports are relabeled with
