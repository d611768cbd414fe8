"""Installing a distribution as pip does, for the tests of what other packages declare: a
``*.dist-info`` folder whose ``entry_points.txt`` ``importlib.metadata`` reads."""

from pathlib import Path


def write_distribution(site: Path, name: str, entry_points: dict[str, dict[str, str]], version: str = "1.0") -> Path:
    """Writes ``site/<name>-<version>.dist-info`` declaring ``entry_points`` (group -> entry name ->
    ``module:attribute``) and returns ``site``; the distribution's modules go on ``sys.path``
    beside it, or elsewhere on the path."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = "".join(
        f"[{group}]\n" + "".join(f"{entry} = {value}\n" for entry, value in entries.items())
        for group, entries in entry_points.items()
    )
    (info / "entry_points.txt").write_text(groups)
    return site
