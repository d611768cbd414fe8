"""The offline models' weights shipped inside the package, and the manifest that vouches for them.

The presets' offline models (the random-init tiny T5 of the ``smoke`` preset, the pretrained one of
the ``cpu`` preset; also the one pretrained with hindsight goals, ``offline:tiny-t5-hindsight``) are
the same bytes for every user, CI run and Slurm node, so they ship with the package under
``torchrl_glam/offline/weights/<name>/`` (safetensors and JSON only: nothing loaded can run code)
instead of being built on first use (the pretrained one takes ~10 CPU minutes).
``weights/manifest.json`` records, per model, the recipe it was built with (and its version name),
the command that built it, the torch/transformers versions, the seed, the final transcript loss
and the sha256 of every file.

Loading checks, every time (hashing 0.8 MB takes a millisecond):

* the recipe version in the manifest is the code's current one; otherwise the shipped weights are
  stale and are *not* used: the current recipe is built into the cache under its own version name
  (with a warning saying how to update the shipped weights);
* every file listed exists and has its hash; otherwise :class:`ShippedWeightsError` names the file
  and the rebuild command (a broken install must not silently train for ten minutes, nor load
  wrong weights).

``TORCHRL_GLAM_SHIPPED_WEIGHTS=0`` ignores the shipped weights (the models are built into the
cache, as before they were shipped). Nothing here writes to the package folder except
:func:`ship`, which the build commands call with ``--ship`` to update it (maintainers, from a
source checkout).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

#: The package folder holding the shipped models and the manifest.
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
MANIFEST_NAME = "manifest.json"
#: Set to "0" to ignore the shipped weights and build into the cache.
SHIPPED_ENV = "TORCHRL_GLAM_SHIPPED_WEIGHTS"
#: The offline models that ship with the package, and the command that rebuilds each one.
SHIPPED_MODELS = {
    "tiny-t5": "python -m torchrl_glam.offline.tiny --ship",
    "tiny-t5-pretrained": "python -m torchrl_glam.offline.pretraining --ship",
    "tiny-t5-hindsight": "python -m torchrl_glam.offline.pretraining --ship --data hindsight",
    "tiny-t5-pretrained-babyai": "python -m torchrl_glam.offline.pretraining --ship --env babyai",
    "tiny-t5-pretrained-textworld_coin_collector": (
        "python -m torchrl_glam.offline.pretraining --ship --env textworld_coin_collector"
    ),
    "tiny-t5-pretrained-textworld_treasure_hunter": (
        "python -m torchrl_glam.offline.pretraining --ship --env textworld_treasure_hunter"
    ),
}


class ShippedWeightsError(RuntimeError):
    """A shipped model file is missing or does not match the manifest."""


def recipe_version(recipe: dict) -> str:
    """The version name of a recipe: ``r`` + 10 hex digits of the hash of its canonical JSON.

    Any change of a recipe's values (steps, seed, model shape, vocabulary, its explicit version
    number...) gives a new name, so a cache directory or a shipped model of another recipe is never
    taken for this one.
    """
    canonical = json.dumps(recipe, sort_keys=True, separators=(",", ":"))
    return "r" + hashlib.sha256(canonical.encode()).hexdigest()[:10]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def shipped_enabled() -> bool:
    return os.environ.get(SHIPPED_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _fix(name: str) -> str:
    return (
        f"Reinstall torchrl_glam, or rebuild the shipped files from a source checkout with "
        f"`{SHIPPED_MODELS[name]}`, or set {SHIPPED_ENV}=0 to build offline:{name} into the cache "
        "instead."
    )


def read_manifest(weights_dir: Path | None = None) -> dict:
    """The manifest of the shipped weights; :class:`ShippedWeightsError` if missing or unreadable."""
    path = (weights_dir or WEIGHTS_DIR) / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ShippedWeightsError(
            f"the shipped weights' manifest {path} is missing. " + _fix("tiny-t5-pretrained")
        ) from None
    except (OSError, ValueError) as error:
        raise ShippedWeightsError(
            f"the shipped weights' manifest {path} cannot be read ({error}). " + _fix("tiny-t5-pretrained")
        ) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("models"), dict):
        raise ShippedWeightsError(
            f"the shipped weights' manifest {path} has no 'models' table. " + _fix("tiny-t5-pretrained")
        )
    return manifest


_warned: set[tuple[str, str]] = set()


def shipped_model_path(name: str, version: str, weights_dir: Path | None = None) -> Path | None:
    """The verified shipped directory of the offline model ``name`` at recipe ``version``.

    ``None`` when the model is not shipped, when ``TORCHRL_GLAM_SHIPPED_WEIGHTS=0``, or when the
    shipped weights were built with another recipe (stale: warned about, never used). Raises
    :class:`ShippedWeightsError` naming the file when a shipped file is missing or corrupted.
    """
    if name not in SHIPPED_MODELS or not shipped_enabled():
        return None
    weights_dir = weights_dir or WEIGHTS_DIR
    entry = read_manifest(weights_dir)["models"].get(name)
    if entry is None:
        raise ShippedWeightsError(
            f"the manifest {weights_dir / MANIFEST_NAME} has no entry for offline:{name}. " + _fix(name)
        )
    if entry.get("recipe_version") != version:
        if (name, version) not in _warned:
            _warned.add((name, version))
            warnings.warn(
                f"the shipped weights of offline:{name} were built with recipe {entry.get('recipe_version')}, "
                f"this code's recipe is {version}: they are not used, the model is built into the cache "
                f"instead. To ship the new recipe, run `{SHIPPED_MODELS[name]}` and commit "
                f"torchrl_glam/offline/weights/.",
                stacklevel=3,
            )
        return None
    directory = weights_dir / name
    for file, expected in sorted(entry.get("files", {}).items()):
        path = directory / file
        if not path.is_file():
            raise ShippedWeightsError(f"the shipped file {path} of offline:{name} is missing. " + _fix(name))
        actual = sha256_of(path)
        if actual != expected:
            raise ShippedWeightsError(
                f"the shipped file {path} of offline:{name} is corrupted: its sha256 is {actual}, the "
                f"manifest says {expected}. " + _fix(name)
            )
    if not entry.get("files"):
        raise ShippedWeightsError(
            f"the manifest {weights_dir / MANIFEST_NAME} lists no files for offline:{name}. " + _fix(name)
        )
    return directory


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
        "Offline models shipped with torchrl_glam (see torchrl_glam/offline/shipped.py); "
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
