"""The library's layers reach an environment only through the protocol package
(``torchrl_glam.envs``: the protocol, its keys, the registry, the shared transforms): ``modules/``,
``objectives/``, ``data/``, ``training/``, ``algorithms/`` and ``benchmarks/`` import no environment's subpackage,
anywhere in their code (functions and ``importlib.import_module("...")`` calls included), and name
no environment in a string (``NAME_BLIND``). No module of the package imports
the research record (``experiments``), which the wheel does not ship. The modules of a training
script's command line import nothing heavy when they load (``LIGHT``)."""

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "torchrl_glam"
LAYERS = ("modules", "objectives", "data", "training", "algorithms", "benchmarks")
#: the envs modules a layer may import: the protocol package, nothing environment-specific
ALLOWED = {
    "torchrl_glam.envs",
    *(f"torchrl_glam.envs.{m}" for m in ("keys", "protocol", "registry", "transforms", "env_state")),
}


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, imported names) of every absolute import of a file, anywhere in its code:
    ``import a.b`` gives ("a.b", ["a.b"]); ``from a import b`` gives ("a", ["a", "a.b"]);
    ``importlib.import_module("a.b")`` (or ``__import__``) with a literal name counts as ``import a.b``,
    and so does a string that is a whole dotted name of the package (``{"x": "torchrl_glam.data.her"}``,
    imported later by name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and _dynamic_import(node.func) and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                found.append((node.lineno, name.value, [name.value]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value):
            found.append((node.lineno, node.value, [node.value]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, [node.module] + [f"{node.module}.{a.name}" for a in node.names]))
    return found


#: a module of the package named in a string
MODULE_NAME = re.compile(r"torchrl_glam(\.[a-z_][a-z0-9_]*)+")


def _dynamic_import(func: ast.expr) -> bool:
    """``import_module``, ``importlib.import_module`` or ``__import__``."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def env_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The modules of an environment's subpackage (torchrl_glam.envs.<environment>) a file imports."""
    return [
        f"{path.relative_to(root)}:{line} imports {module}"
        for line, module, _ in imports(path)
        if module.startswith("torchrl_glam.envs.") and module not in ALLOWED
    ]


def experiments_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The ``experiments`` modules a file imports."""
    return [
        f"{path.relative_to(root)}:{line} imports {name}"
        for line, _, names in imports(path)
        for name in names
        if name == "experiments" or name.startswith("experiments.")
    ]


def private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The private names of the package (``_name``) a file imports: its public API is what the
    research record and the tests build on."""
    return [
        f"{path.relative_to(root)}:{line} imports {name}"
        for line, module, names in imports(path)
        if module.startswith("torchrl_glam")
        for name in names[1:]
        if name.rsplit(".", 1)[-1].startswith("_") and not name.rsplit(".", 1)[-1].startswith("__")
    ]


def layer_files(root: Path) -> list[Path]:
    return sorted(p for layer in LAYERS for p in (root / layer).rglob("*.py"))


def test_layers_import_no_specific_environment():
    violations = [v for path in layer_files(PACKAGE) for v in env_imports(path)]
    assert not violations, "reach the environment through torchrl_glam.envs (the protocol):\n" + "\n".join(violations)


def test_the_package_imports_no_experiment():
    violations = [v for path in sorted(PACKAGE.rglob("*.py")) for v in experiments_imports(path)]
    assert not violations, "the package must run without the research record (experiments/):\n" + "\n".join(violations)


def test_the_research_record_imports_no_private_name():
    files = sorted((PACKAGE.parent / "experiments").rglob("*.py"))
    violations = [v for path in files for v in private_imports(path)]
    assert not violations, "experiments/ builds on the package's public names:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    "check, source",
    [
        # the layouts before the protocol imported the environment in these ways
        (env_imports, "from torchrl_glam.envs.playground import GoalCatalogue\n"),
        (env_imports, "from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES\n"),
        (env_imports, "def f():\n    import torchrl_glam.envs.babyai\n"),
        (env_imports, "import importlib\nimportlib.import_module('torchrl_glam.envs.babyai.torchrl_env')\n"),
        (experiments_imports, "from experiments.tools.results import aggregate\n"),
        (experiments_imports, "def f():\n    import experiments.tools.discovery\n"),
        (experiments_imports, "import experiments\n"),
        (private_imports, "from torchrl_glam.modules.attention import _attend\n"),
    ],
)
def test_the_checks_catch_their_imports(tmp_path, check, source):
    assert check(package_file(tmp_path, "data", source), tmp_path)


@pytest.mark.parametrize(
    "source",
    [
        "from torchrl_glam.envs import get_environment\n",
        "from torchrl_glam.envs.keys import GOAL_ID_KEY\n",
        "import torchrl_glam.envs.protocol\n",
    ],
)
def test_the_protocol_package_imports_are_allowed(tmp_path, source):
    assert env_imports(package_file(tmp_path, "data", source), tmp_path) == []


def package_file(root: Path, room: str, source: str) -> Path:
    """``source`` as a module of ``room`` in a package tree under ``root``."""
    path = root / "torchrl_glam" / room / "x.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


#: The rooms that reach an environment only through the protocol's members, never by its name: a
#: new environment then edits none of them (presets, docstrings and comments aside).
NAME_BLIND = ("storage", "data", "modules", "offline", "objectives", "training", "algorithms", "launch", "benchmarks")
#: The one literal allowed: the config's default environment, which the command line reads before
#: any environment loads (tests/training/test_light_command_line.py checks it is the registry's).
DEFAULT_NAME = ("training/config/sections.py", "DEFAULT_ENVIRONMENT")


def environment_names_in(path: Path, names, root: Path = PACKAGE) -> list[str]:
    """The string literals of a file that name an environment (one of ``names``), outside its
    docstrings (a string standing alone as a statement) and the config's default environment."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring
        elif (
            isinstance(node, ast.Assign)
            and path.relative_to(root).as_posix() == DEFAULT_NAME[0]
            and [getattr(t, "id", None) for t in node.targets] == [DEFAULT_NAME[1]]
        ):
            skipped.add(id(node.value))
    return [
        f"{path.relative_to(root.parent)}:{node.lineno} names the environment {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and id(node) not in skipped and node.value in names
    ]


def test_the_rooms_name_no_environment():
    from torchrl_glam.envs import environment_names

    names = set(environment_names())
    files = sorted(p for room in NAME_BLIND for p in (PACKAGE / room).rglob("*.py"))
    violations = [v for path in files for v in environment_names_in(path, names)]
    assert not violations, (
        "read what an environment differs in from a member of TextEnvironment, not from its name:\n"
        + "\n".join(violations)
    )


@pytest.mark.parametrize(
    "source, found",
    [
        ('if environment.name == "playground":\n    pass\n', True),
        ('def f(environment="babyai"):\n    pass\n', True),
        ('SETS = {"playground": ("train",)}\n', True),
        ('DEFAULT_ENVIRONMENT = "playground"\n', True),  # only the config's
        ('"""Playground-Text: "playground"."""\n', False),
        ('def f():\n    """babyai"""\n', False),
        ('NAME = "tiny-t5-pretrained-babyai"  # playground\n', False),
    ],
)
def test_the_check_catches_a_named_environment(tmp_path, source, found):
    path = package_file(tmp_path, "training", source)
    assert bool(environment_names_in(path, {"playground", "babyai"}, tmp_path / "torchrl_glam")) is found
    config = path.parent / "config" / "sections.py"
    config.parent.mkdir()
    config.write_text('DEFAULT_ENVIRONMENT = "playground"\n')
    assert environment_names_in(config, {"playground", "babyai"}, tmp_path / "torchrl_glam") == []


#: The package's rooms, each importing only from the ones before it (torchrl_glam/__init__.py).
#: ``offline`` (the offline models' names, recipes, shipped weights and cache, and their builders,
#: which roll out episodes with ``data``) comes before ``modules``, whose loading finds them there.
ROOMS = ("storage", "envs", "data", "offline", "modules", "objectives", "training", "algorithms", "launch")


def room_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The imports of a file (anywhere in its code) from a room after its own."""
    room = path.relative_to(root).parts[1]
    later = tuple(f"torchrl_glam.{r}" for r in ROOMS[ROOMS.index(room) + 1 :])
    return [
        f"{path.relative_to(root)}:{line} imports {module}"
        for line, module, _ in imports(path)
        if module in later or module.startswith(tuple(f"{r}." for r in later))
    ]


def test_rooms_import_only_the_rooms_before_them():
    files = sorted(p for room in ROOMS[:-1] for p in (PACKAGE / room).rglob("*.py"))
    violations = [v for path in files for v in room_imports(path)]
    assert not violations, "a room imports only the rooms before it:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    "room, source",
    [
        ("data", "from torchrl_glam.modules.scoring import make_scorer\n"),
        ("data", "def f():\n    from torchrl_glam.offline.tiny import build_tiny_model\n"),
        ("data", "import torchrl_glam.training.run\n"),
        ("data", "def f():\n    importlib.import_module('torchrl_glam.objectives.sac_glam')\n"),
        ("data", "STREAMS = {'scorer': 'torchrl_glam.modules.scoring'}\n"),
        # the offline models' home loads nothing of the LLM modules: loading reads it, not the reverse
        ("offline", "from torchrl_glam.modules.loading import load_llm\n"),
    ],
)
def test_the_check_catches_a_module_importing_a_later_room(tmp_path, room, source):
    assert room_imports(package_file(tmp_path, room, source), tmp_path)


@pytest.mark.parametrize(
    "room, source",
    [
        ("modules", "from torchrl_glam.envs.protocol import get_environment\n"),
        ("modules", "from torchrl_glam.offline.resolve import resolve\n"),
        ("offline", "from torchrl_glam.data.episodes import rollout_episodes\n"),
    ],
)
def test_a_room_imports_the_rooms_before_it(tmp_path, room, source):
    assert room_imports(package_file(tmp_path, room, source), tmp_path) == []


#: The modules a training script's command line loads (``training/cli.py``): at module level they
#: import only each other and the standard library, so that ``--help`` and the parser's refusals
#: answer before torch, TorchRL, transformers and the environments load (those are imported inside
#: the functions that need them; tests/training/test_light_command_line.py checks the result).
LIGHT = (
    "torchrl_glam",
    "torchrl_glam.storage",
    "torchrl_glam.storage.files",
    "torchrl_glam.training",
    "torchrl_glam.training.cli",
    "torchrl_glam.training.config",
    *(
        f"torchrl_glam.training.config.{m}"
        for m in ("base", "helptext", "options", "overrides", "presets", "rules", "sections", "values")
    ),
    "torchrl_glam.training.eval_sets",
    "torchrl_glam.training.rundir",
    "torchrl_glam.training.compatibility",
    "torchrl_glam.algorithms.scripts",
    "torchrl_glam.algorithms",
    "torchrl_glam.algorithms.sac_glam",
    "torchrl_glam.algorithms.sac_glam.config",
    "torchrl_glam.algorithms.sac_glam.train",
    "torchrl_glam.algorithms.ppo_glam",
    "torchrl_glam.algorithms.ppo_glam.config",
    "torchrl_glam.algorithms.ppo_glam.train",
    "torchrl_glam.algorithms.grpo_glam",
    "torchrl_glam.algorithms.grpo_glam.config",
    "torchrl_glam.algorithms.grpo_glam.train",
)
#: The libraries they may import: PyYAML, for the preset files (OmegaConf, which types values,
#: loads where a value is typed: --help and an unknown field's refusal answer without it).
LIGHT_LIBRARIES = ("yaml",)


def module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path) -> list[tuple[int, list[str]]]:
    """(line, imported names) of the absolute imports a module runs when it is imported: its
    top-level statements and their ``if`` / ``try`` blocks, not functions nor ``if TYPE_CHECKING``."""
    found, statements = [], list(ast.parse(path.read_text(), filename=str(path)).body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, ast.Import):
            found += [(node.lineno, [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, [node.module] + [f"{node.module}.{a.name}" for a in node.names]))
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            statements += node.body + node.orelse
        elif isinstance(node, ast.Try):
            statements += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return found


def heavy_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The module-level imports of ``path`` that are neither the standard library nor a LIGHT module
    (a name of a ``from`` import counts when it is a module of the package)."""
    modules = {module_name(p, root) for p in (root / "torchrl_glam").rglob("*.py")}
    violations = []
    for line, names in module_level_imports(path):
        top = names[0].split(".")[0]
        if top != "torchrl_glam":
            if top not in sys.stdlib_module_names and top not in ("__future__", *LIGHT_LIBRARIES):
                violations.append(f"{path.relative_to(root)}:{line} imports {names[0]}")
            continue
        heavy = [name for name in names if name in modules and name not in LIGHT]
        violations += [f"{path.relative_to(root)}:{line} imports {name}" for name in heavy]
    return violations


def light_files(root: Path = PACKAGE.parent) -> list[Path]:
    return [p for p in sorted((root / "torchrl_glam").rglob("*.py")) if module_name(p, root) in LIGHT]


def test_the_command_line_modules_import_nothing_heavy_at_module_level():
    files = light_files()
    assert {module_name(p) for p in files} == set(LIGHT)
    violations = [v for path in files for v in heavy_imports(path)]
    assert not violations, (
        "the command line's modules import torch, TorchRL and the environments inside the functions "
        "that need them:\n" + "\n".join(violations)
    )


@pytest.mark.parametrize(
    "source, heavy",
    [
        ("import torch\n", True),
        ("from torchrl_glam.training import evaluation\n", True),
        ("from torchrl_glam.envs.protocol import DEFAULT_ENVIRONMENT\n", True),
        ("try:\n    import transformers\nexcept ImportError:\n    pass\n", True),
        ("import json\nfrom torchrl_glam.training.config import GLAMConfig\n", False),
        ("def f():\n    import torch\n", False),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torchrl_glam.envs.protocol import X\n", False),
    ],
)
def test_the_check_catches_a_heavy_module_level_import(tmp_path, source, heavy):
    for room in ("envs", "training"):  # the modules the sources name
        (tmp_path / "torchrl_glam" / room).mkdir(parents=True, exist_ok=True)
    (tmp_path / "torchrl_glam" / "training" / "evaluation.py").write_text("")
    (tmp_path / "torchrl_glam" / "training" / "config.py").write_text("")
    (tmp_path / "torchrl_glam" / "envs" / "protocol.py").write_text("")
    assert bool(heavy_imports(package_file(tmp_path, "training", source), tmp_path)) is heavy


def import_circles(root: Path = PACKAGE) -> list[str]:
    """The pairs of the package's modules that import each other, anywhere in their code (in a
    function, under ``TYPE_CHECKING``, by name): each pair is a circle a reader must hold at once."""
    paths = {
        ".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in root.rglob("*.py")
    }
    graph = {
        name: {
            imported for _, _, names in imports(path) for imported in names if imported in paths and imported != name
        }
        for name, path in paths.items()
    }
    return sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and a in graph[b])


def test_no_two_modules_import_each_other():
    assert import_circles() == []


def test_the_check_catches_two_modules_importing_each_other(tmp_path):
    package = tmp_path / "torchrl_glam"
    package.mkdir()
    (package / "a.py").write_text("import torchrl_glam.b\n")
    (package / "b.py").write_text("def f():\n    from torchrl_glam.a import x\n")
    (package / "c.py").write_text("import torchrl_glam.a\n")
    assert import_circles(package) == ["torchrl_glam.a <-> torchrl_glam.b"]
