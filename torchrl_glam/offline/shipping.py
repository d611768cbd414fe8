"""Shipping an offline model with the package (maintainers, from a source checkout): its files
into ``torchrl_glam/modules/weights/<name>/`` and its manifest entry (:mod:`~torchrl_glam.modules.shipped`
checks them at every load)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from torchrl_glam.modules.shipped import (
    MANIFEST_NAME,
    SHIPPED_MODELS,
    WEIGHTS_DIR,
    ShippedWeightsError,
    read_manifest,
    sha256_of,
)


def ship(name: str, built: Path, record: dict, weights_dir: Path | None = None) -> Path:
    """Copy the model directory ``built`` into the package folder as ``weights/<name>`` and write its
    manifest entry: ``record`` (recipe, version, command, seed, losses...) plus the library
    versions and the sha256 of every file. Returns the shipped directory."""
    import tokenizers
    import torch
    import transformers

    if name not in SHIPPED_MODELS:
        raise ValueError(f"offline:{name} is not one of the shipped models {sorted(SHIPPED_MODELS)}")
    weights_dir = weights_dir or WEIGHTS_DIR
    weights_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(p.name for p in built.iterdir() if p.is_file())
    bad = [f for f in files if not f.endswith((".safetensors", ".json", ".txt"))]
    if bad:  # nothing shipped may run code when loaded (no pickle)
        raise ValueError(f"refusing to ship {bad}: only safetensors, JSON and text files ship")
    target = weights_dir / name
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=weights_dir))
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the weights from other users of the install
    try:
        for file in files:
            shutil.copyfile(built / file, staging / file)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = read_manifest(weights_dir)
    except ShippedWeightsError:
        manifest = {"models": {}}
    manifest["about"] = (
        "Offline models shipped with torchrl_glam (see torchrl_glam/modules/shipped.py); "
        "files are checked against these sha256 at every load."
    )
    manifest["models"][name] = {
        **record,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "files": {file: sha256_of(target / file) for file in files},
    }
    path = weights_dir / MANIFEST_NAME
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path)
    return target
