"""The documentation site builds with the one command the README gives, warnings as errors: a
docstring whose RST is broken, a page missing from a table of contents or a dead cross-reference
fails here, and every public module has its API page."""

import os
import pkgutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    out = tmp_path / "html"
    # the README's command, with the output elsewhere so a developer's docs/_build stays
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs/site", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert (out / "index.html").exists()

    import torchrl_glam

    for room in ["storage", "envs", "data", "offline", "modules", "objectives", "training", "algorithms", "launch"]:
        package = __import__(f"torchrl_glam.{room}", fromlist=["_"])
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                assert (out / "api" / f"{info.name}.html").exists(), info.name
    assert torchrl_glam.__version__ in (out / "index.html").read_text()

    # the runnable examples (tests/test_docstring_examples.py) show on their modules' pages, as
    # code with its prompts: at least one "Examples" heading per example on each page
    from tests.test_docstring_examples import EXAMPLES, _resolve

    expected = Counter(_resolve(path).__module__ for path in EXAMPLES)
    for module, count in expected.items():
        page = (out / "api" / f"{module}.html").read_text()
        assert page.count('<p class="rubric">Examples</p>') >= count, module
        assert '<span class="gp">&gt;&gt;&gt; </span>' in page, module
