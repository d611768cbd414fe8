"""The two pretraining probes beside the shipped ``offline:tiny-t5-hindsight`` (README, "Session 9"):
each builds a model into DIR and prints its ``object_choice.py --zero-shot`` rows.

    python experiments/cpu_full/hindsight/pretraining_probes.py share1 DIR   # the cpu model + 400 steps, all hindsight
    python experiments/cpu_full/hindsight/pretraining_probes.py window2 DIR  # from scratch, hindsight = last 2 steps
"""

import subprocess
import sys
from pathlib import Path

import torch

from torchrl_glam.modules.loading import resolve_model_path
from torchrl_glam.offline.pretraining import pretrain
from torchrl_glam.offline.transcripts import HindsightTranscripts

torch.set_num_threads(1)
probe, out = sys.argv[1], sys.argv[2]
if probe == "share1":  # every transcript with a hindsight goal, continuing the cpu presets' model
    pretrain(
        out,
        start_from=resolve_model_path("offline:tiny-t5-pretrained"),
        steps=400,
        seed=1,
        data=HindsightTranscripts(seed=1, hindsight_share=1.0),
    )
elif probe == "window2":  # only the step of the report and the one before it: "Go to X", then "Grasp"
    pretrain(out, data=HindsightTranscripts(seed=0, hindsight_share=0.5, window=2))
else:
    sys.exit(f"unknown probe {probe!r}: share1 or window2")
subprocess.run(
    [sys.executable, str(Path(__file__).parents[1] / "object_choice.py"), "--zero-shot", out, "--episodes", "1024"],
    check=True,
)
