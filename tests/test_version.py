"""The version is written once, as ``torchrl_glam.__version__``: pyproject.toml reads it (a wheel's
metadata then agrees, tests/launch/test_wheel_install.py), and the changelog's newest release is it."""

import re
from pathlib import Path

import tomllib

import torchrl_glam

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_reads_the_version_from_the_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    from setuptools.config.pyprojecttoml import read_configuration

    # what setuptools builds a wheel or an editable install with (it reads the literal, importing nothing)
    assert read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["version"] == torchrl_glam.__version__


def test_the_changelog_s_newest_release_is_the_version():
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert releases[0] == torchrl_glam.__version__, releases
    assert releases == sorted(releases, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def test_a_run_records_the_version_of_the_code_it_ran():
    from torchrl_glam.training.provenance import current_environment

    # a checkout on PYTHONPATH over an install of another version records its own
    assert current_environment()["packages"]["torchrl_glam"] == torchrl_glam.__version__
