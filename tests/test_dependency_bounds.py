"""The dependency bounds of pyproject.toml are ones the suite runs: every requirement holds for the
installed versions, and the combinations known to crash are outside the bounds."""

from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
REQUIREMENTS = {Requirement(r).name: Requirement(r) for r in PYPROJECT["project"]["dependencies"]}


def _lower_bound(requirement: Requirement) -> Version:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    assert bounds, f"{requirement} has no lower bound"
    return max(bounds)


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_the_installed_version_meets_the_requirement_and_the_bound_is_not_below_a_major_series(name):
    requirement = REQUIREMENTS[name]
    installed = Version(metadata.version(name))
    assert requirement.specifier.contains(installed, prereleases=True), (name, installed)
    # a lower bound a whole major version below what the suite ran was never tested
    assert _lower_bound(requirement).major == installed.major, (name, str(requirement), str(installed))


@pytest.mark.parametrize(
    "name, version, why",
    [
        ("peft", "0.21.0", "get_peft_model crashes on every T5 with transformers 5.x"),
        ("tensordict", "0.15.0", "torchrl 0.14 needs tensordict 0.14"),
        ("transformers", "4.50.0", "the suite runs transformers 5 (scorer, peft, GGUF loading)"),
    ],
)
def test_versions_known_not_to_work_are_outside_the_bounds(name, version, why):
    assert not REQUIREMENTS[name].specifier.contains(version, prereleases=True), why
