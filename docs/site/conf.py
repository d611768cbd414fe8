"""Sphinx configuration of the torchrl_glam documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs/site docs/_build/html`` (tests/test_docs.py runs it).
"""

import inspect
import pkgutil
import re
import sys
from importlib import import_module
from pathlib import Path

SITE = Path(__file__).resolve().parent
ROOT = SITE.parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout, not whichever copy is installed

import torchrl_glam  # noqa: E402

project = "torchrl_glam"
author = "torchrl_glam contributors"
release = version = torchrl_glam.__version__
copyright = "torchrl_glam contributors"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # "[see](page.md#a-heading)" links resolve to the heading's anchor

# Furo (PyPI) is the theme of several PyData projects: readable API pages with a per-page table of
# contents and a dark mode, and no JavaScript build step.
html_theme = "furo"
html_title = f"torchrl_glam {release}"

autodoc_member_order = "bysource"
add_module_names = False  # the page title names the module; signatures read "PlaygroundTextEnv(...)"
autodoc_typehints = "description"
# Overrides of TorchRL / tensordict / torch methods without a docstring of their own would otherwise
# show the base class's docstring, whose RST is written for those projects' sites.
autodoc_inherit_docstrings = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autosummary_generate = False  # the tables of the rooms' exports link to the module pages below
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# The API reference: one page per public module of the rooms below, generated at each build so a new
# module appears without editing the docs. Private modules (``_x``, ``__main__``) are not imported.
API_ROOMS = ["storage", "envs", "data", "offline", "modules", "objectives", "training", "algorithms", "launch"]


def _write_api_pages() -> None:
    out = SITE / "api"
    out.mkdir(exist_ok=True)
    rooms = []
    for room in API_ROOMS:
        package = import_module(f"torchrl_glam.{room}")
        modules = sorted(
            info.name
            for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
            if not any(part.startswith("_") for part in info.name.split("."))
        )
        rooms.append(package.__name__)
        lines = [
            package.__name__,
            "=" * len(package.__name__),
            "",
            f".. automodule:: {package.__name__}",
            "   :no-members:",
            "",
        ]
        lines += _exports_table(package)
        lines += ["Modules", "-------", "", ".. toctree::", "   :maxdepth: 1", "", *[f"   {name}" for name in modules]]
        _write(out / f"{package.__name__}.rst", lines)
        for name in modules:
            page = [name, "=" * len(name), "", f".. automodule:: {name}"]
            module = import_module(name)
            if hasattr(module, "__path__"):  # a subpackage (an environment): its exports, documented in their modules
                page += ["   :no-members:", "", *_exports_table(module)]
                _write(out / f"{name}.rst", page)
                continue
            if name.endswith(".train"):  # a training script is read as a whole: it is the algorithm's loop
                source = Path(import_module(name).__file__).relative_to(ROOT)
                page += ["", "Source", "------", "", f".. literalinclude:: /../../{source}", "   :language: python"]
            _write(out / f"{name}.rst", page)
    _write(
        out / "index.rst",
        [
            "API reference",
            "=============",
            "",
            "Generated from the docstrings of the public modules, room by room: a room imports only",
            "from the rooms above it.",
            "",
            ".. toctree::",
            "   :maxdepth: 2",
            "",
            *[f"   {r}" for r in rooms],
        ],
    )
    # a module renamed or removed since the last build leaves its page: drop it (it is in no toctree)
    for stale in set(out.glob("*.rst")) - _WRITTEN:
        stale.unlink()


def _exports_table(package) -> list[str]:
    """The autosummary of a package's exported classes and functions (none: no table)."""
    exported = _exported_callables(package)
    if not exported:
        return []
    return [f"``from {package.__name__} import ...``", "", ".. autosummary::", "", *[f"   ~{t}" for t in exported], ""]


def _exported_callables(package) -> list[str]:
    """The classes and functions of a room's ``__all__``, by the module that defines them (where
    their documentation is)."""
    targets = []
    for name in getattr(package, "__all__", []):
        obj = getattr(package, name)
        if callable(obj) and getattr(obj, "__module__", "").startswith(package.__name__ + "."):
            # relative to the room: autosummary resolves it against the page's current module
            targets.append(f"{obj.__module__.removeprefix(package.__name__ + '.')}.{obj.__qualname__}")
    return targets


_WRITTEN: set[Path] = set()


def _write(path: Path, lines: list[str]) -> None:
    _WRITTEN.add(path)
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime: no rebuild
        path.write_text(text)


_write_api_pages()

# Docstrings write tensor shapes the PyTorch way, ``[*B, A]``, readable in a terminal; in RST a bare
# "*" opens emphasis. Escape the stars inside square brackets, outside inline literals.
_LITERAL = re.compile(r"(``.+?``)")
_BRACKETS = re.compile(r"\[[^\]`]*\]")


def _escape_shape_stars(app, what, name, obj, options, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        parts = _LITERAL.split(line)
        for j in range(0, len(parts), 2):  # the even parts are outside ``literals``
            parts[j] = _BRACKETS.sub(lambda m: re.sub(r"(?<!\\)\*", r"\\*", m.group(0)), parts[j])
        lines[i] = "".join(parts)


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """A class's signature is its ``__init__``'s parameters, without annotations (they are listed under
    Parameters). TorchRL's ``EnvBase`` and transforms construct through a metaclass
    ``__call__(*args, **kwargs)``, which autodoc would show instead; and the configs' dataclass
    signatures would repeat every field's annotation as a quoted string."""
    if what != "class" or not signature or (signature != "(*args, **kwargs)" and ":" not in signature):
        return None
    try:
        init = inspect.signature(obj.__init__)
    except (TypeError, ValueError):
        return None
    empty = inspect.Parameter.empty
    parameters = [p.replace(annotation=empty) for p in list(init.parameters.values())[1:]]
    return str(init.replace(parameters=parameters, return_annotation=empty)), return_annotation


def setup(app):
    app.connect("autodoc-process-docstring", _escape_shape_stars)
    app.connect("autodoc-process-signature", _init_signature)
