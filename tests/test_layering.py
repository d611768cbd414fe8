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


def imported_names(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, name, from-module) of every absolute import of a file: ``import M`` names M;
    ``from M import a`` names M and M.a."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, name, node.module)
                      for name in [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]]
    return found


def env_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The torchrl_glam.envs modules (or names from the envs package itself) a file imports."""
    return [f"{path.relative_to(root)}:{line} imports {name}" for line, name, module in imported_names(path)
            if module not in ALLOWED and name not in ALLOWED
            and (name == "torchrl_glam.envs" or name.startswith("torchrl_glam.envs."))]


def experiments_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The ``experiments`` modules a file imports."""
    return [f"{path.relative_to(root)}:{line} imports {name}" for line, name, _ in imported_names(path)
            if name == "experiments" or name.startswith("experiments.")]


def layer_files(root: Path) -> list[Path]:
    return sorted(p for layer in LAYERS for p in (root / layer).rglob("*.py"))


def test_layers_import_no_specific_environment():
    violations = [v for path in layer_files(PACKAGE) for v in env_imports(path)]
    assert not violations, "import the environment through torchrl_glam.envs.protocol:\n" + "\n".join(violations)


def test_the_package_imports_no_experiment():
    violations = [v for path in sorted(PACKAGE.rglob("*.py")) for v in experiments_imports(path)]
    assert not violations, "the package must run without the research record (experiments/):\n" + "\n".join(violations)


@pytest.mark.parametrize("check, source", [
    # the layouts before the protocol imported the environment in these ways
    (env_imports, "from torchrl_glam.envs import GoalCatalogue\n"),
    (env_imports, "from torchrl_glam.envs.vocabulary import OBJECT_NAMES\n"),
    (env_imports, "def f():\n    import torchrl_glam.envs.playground\n"),
    (env_imports, "import torchrl_glam.envs\n"),
    (experiments_imports, "from experiments.tools.results import aggregate\n"),
    (experiments_imports, "def f():\n    import experiments.tools.discovery\n"),
    (experiments_imports, "import experiments\n"),
])
def test_the_checks_catch_their_imports(tmp_path, check, source):
    path = tmp_path / "torchrl_glam" / "data" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert check(path, tmp_path)


def test_the_protocol_import_is_allowed(tmp_path):
    path = tmp_path / "torchrl_glam" / "data" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text("from torchrl_glam.envs.protocol import get_environment\n")
    assert env_imports(path, tmp_path) == []
