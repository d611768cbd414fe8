"""Fixtures of the reliability tests."""

import pytest
from reliability_helpers import load_example


@pytest.fixture(scope="session")
def sac_example():
    return load_example("sac_glam")


@pytest.fixture(scope="session")
def ppo_example():
    return load_example("ppo_glam")
