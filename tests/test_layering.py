"""The library's layers reach an environment only through the protocol
(``torchrl_glam.envs.protocol``): ``modules/``, ``objectives/`` and ``data/`` import no module of a
specific environment, anywhere in their code (functions included). No module of the package imports
the research record (``experiments``), which the wheel does not ship."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "torchrl_glam"
LAYERS = ("modules", "objectives", "data")
#: the envs modules a layer may import: the protocol, nothing environment-specific
ALLOWED = {"torchrl_glam.envs.protocol"}


def env_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The torchrl_glam.envs modules (or names from the envs package itself) a file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            if node.module in ALLOWED:
                continue
        else:
            continue
        found += [f"{path.relative_to(root)}:{node.lineno} imports {name}" for name in names
                  if (name == "torchrl_glam.envs" or name.startswith("torchrl_glam.envs.")) and name not in ALLOWED]
    return found


def layer_files(root: Path) -> list[Path]:
    return sorted(p for layer in LAYERS for p in (root / layer).rglob("*.py"))


def test_layers_import_no_specific_environment():
    violations = [v for path in layer_files(PACKAGE) for v in env_imports(path)]
    assert not violations, "import the environment through torchrl_glam.envs.protocol:\n" + "\n".join(violations)


@pytest.mark.parametrize("source", [
    "from torchrl_glam.envs import GoalCatalogue\n",
    "from torchrl_glam.envs.vocabulary import OBJECT_NAMES\n",
    "def f():\n    import torchrl_glam.envs.playground\n",
    "import torchrl_glam.envs\n",
])
def test_the_check_catches_environment_imports(tmp_path, source):
    # the layouts before the protocol imported the environment in these ways
    path = tmp_path / "torchrl_glam" / "data" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert env_imports(path, tmp_path)


def test_the_protocol_import_is_allowed(tmp_path):
    path = tmp_path / "torchrl_glam" / "data" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text("from torchrl_glam.envs.protocol import get_environment\n")
    assert env_imports(path, tmp_path) == []



def experiments_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The ``experiments`` modules a file imports, anywhere in its code."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path.relative_to(root)}:{node.lineno} imports {name}" for name in names
                  if name == "experiments" or name.startswith("experiments.")]
    return found


def test_the_package_imports_no_experiment():
    violations = [v for path in sorted(PACKAGE.rglob("*.py")) for v in experiments_imports(path)]
    assert not violations, "the package must run without the research record (experiments/):\n" + "\n".join(violations)


@pytest.mark.parametrize("source", [
    "from experiments.tools.results import aggregate\n",
    "def f():\n    import experiments.tools.discovery\n",
    "import experiments\n",
])
def test_the_check_catches_experiment_imports(tmp_path, source):
    path = tmp_path / "torchrl_glam" / "launch" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert experiments_imports(path, tmp_path)
