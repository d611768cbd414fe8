"""Configs by name: a config as torchrl_glam 0.1 and 0.2 wrote config.json (field names, no
sections: ``env`` and ``model`` for their section's name), a study's preset file by its study
and name, and a config section's fields named in one string."""

from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def by_name(cfg) -> dict:
    short = {path: name for name, path in type(cfg).short_names().items()}
    # an environment's option by its own name, as 0.2 wrote it
    return {short.get(path, path.rsplit(".", 1)[-1]): value for path, value in cfg.flat_dict().items()}


def study_preset(study: str, name: str, algorithm: str = "sac_glam") -> str:
    """``experiments/<study>/presets/<algorithm>/<name>.yaml`` as ``--preset`` and ``make_config`` take it."""
    path = EXPERIMENTS / study / "presets" / algorithm / f"{name}.yaml"
    assert path.is_file(), path
    return str(path)


def fields(section, names: str) -> tuple:
    """The values of ``section``'s fields named in ``names`` (space-separated), in that order."""
    return tuple(getattr(section, name) for name in names.split())
