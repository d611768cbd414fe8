"""The names a config's ``env`` field accepts: each a factory of a :class:`TextEnvironment`.

An environment is registered by a package through the entry-point group ``torchrl_glam.environments``
(the built-in ones too), its value the ``module:attribute`` of a class or factory of a
:class:`TextEnvironment`, imported when a config first names it::

    # pyproject.toml of the package that holds MyEnvironment
    [project.entry-points."torchrl_glam.environments"]
    my_env = "my_package.environment:MyEnvironment"

or from Python, in a script (``register_environment("my_env", MyEnvironment)``, then
``main(["env=my_env", ...])``). A config names a registered environment and never an import path,
so nothing the library loads runs code from a config file. A module or factory that fails, or a
factory that returns no :class:`TextEnvironment`, is refused as an :class:`EnvironmentLoadError`
whose one line names the environment, its entry point and the package that declares it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from torchrl_glam.envs.protocol import TextEnvironment

#: The environment of a config that names none (the paper's)
DEFAULT_ENVIRONMENT = "playground"
#: The entry-point group of the environments
ENTRY_POINT_GROUP = "torchrl_glam.environments"
#: The built-in environments, as pyproject.toml declares them in :data:`ENTRY_POINT_GROUP`
#: (a test checks they agree): the registry falls back on them where the installed metadata lacks
#: them (a source checkout on ``PYTHONPATH`` over an install of an earlier version)
BUILT_IN = {
    "playground": "torchrl_glam.envs.playground.environment:PlaygroundText",
    "babyai": "torchrl_glam.envs.babyai.environment:BabyAIText",  # imports minigrid: only when chosen
    # import textworld only when chosen
    "textworld_coin_collector": "torchrl_glam.envs.textworld.environment:coin_collector",
    "textworld_cooking": "torchrl_glam.envs.textworld.environment:cooking",
    "textworld_treasure_hunter": "torchrl_glam.envs.textworld.environment:treasure_hunter",
}

#: The entry-point group where an environment's package declares how its offline tiny models are
#: pretrained (``torchrl_glam.offline.recipes``)
RECIPE_GROUP = "torchrl_glam.transcript_recipes"
#: The built-in environments' recipes, as pyproject.toml declares them in :data:`RECIPE_GROUP` (a
#: test checks they agree), for the same fallback as :data:`BUILT_IN`: without it, metadata of an
#: earlier install would give Playground-Text the default recipe and other models' names
BUILT_IN_RECIPES = {name: value.split(":")[0] + ":TRANSCRIPT_RECIPE" for name, value in BUILT_IN.items()}


class EnvironmentLoadError(ValueError):
    """A registered environment that cannot be loaded, built or trained on: its module or factory
    fails, it is not a :class:`TextEnvironment`, or what it builds breaks its own specs. The
    message is one line naming the environment, where it comes from (the entry point and the
    package that declares it, or ``register_environment``), what went wrong and the fix. A
    ``ValueError``, as the registry's other refusals: a config's validation reports it as a bad
    ``env.name``."""


_FACTORIES: dict[str, Callable[[], TextEnvironment]] = {}
_INSTANCES: dict[str, TextEnvironment] = {}
#: the entry points already registered (name, values), and the sys.path they were read from
_SEEN: set[tuple[str, str]] = set()
_SCANNED_PATH: list[str] | None = None


def _discover() -> None:
    """Registers the entry points of the installed distributions not yet registered (read again
    when sys.path changes). Imports none of them."""
    global _SCANNED_PATH
    if _SCANNED_PATH == sys.path:
        return
    _SCANNED_PATH = list(sys.path)
    found: dict[str, dict[str, EntryPoint]] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, {}).setdefault(entry_point.value, entry_point)
    for name, value in BUILT_IN.items():
        found.setdefault(name, {value: EntryPoint(name, value, ENTRY_POINT_GROUP)})
    for name, declared in found.items():
        key = (name, tuple(sorted(declared)))
        if key not in _SEEN:
            _SEEN.add(key)
            _FACTORIES.setdefault(name, _EntryPointFactory(*declared.values()))


def _package(entry_point: EntryPoint) -> str | None:
    """The distribution that declares ``entry_point`` ("name version"); ``None`` when unknown."""
    dist = getattr(entry_point, "dist", None)
    if dist is not None:
        return f"{dist.name} {dist.version}"
    # the built-in fallback (a source checkout): this library's own entry points
    return "torchrl_glam (built in)" if BUILT_IN.get(entry_point.name) == entry_point.value else None


def _declared(entry_point: EntryPoint) -> str:
    package = _package(entry_point)
    where = f"of the package {package}" if package else "of an unknown package"
    return f"entry point {entry_point.name} = {entry_point.value!r} {where}, group {ENTRY_POINT_GROUP}"


class _EntryPointFactory:
    """The factory of an environment an entry point declares: imports its ``module:attr`` and calls
    it, refusing each failure with the entry point and its package named."""

    def __init__(self, entry_point: EntryPoint, *others: EntryPoint) -> None:
        self.entry_point, self.others = entry_point, others

    def __call__(self) -> TextEnvironment:
        entry_point = self.entry_point
        if self.others:  # two packages claim the name: neither is taken silently for the other
            values = ", ".join(_declared(e) for e in (entry_point, *self.others))
            raise EnvironmentLoadError(
                f"the environment {entry_point.name!r} is declared by several entry points ({values}): uninstall "
                "all but one package, or register the one you mean with "
                "torchrl_glam.envs.register_environment(..., replace=True)"
            )
        try:  # the module first: an AttributeError of its code is not a missing attribute
            importlib.import_module(entry_point.module)
        except Exception as error:  # SyntaxError, ImportError, whatever its top level raises
            raise environment_error(entry_point.name, "failed to import", error) from error
        try:
            target = entry_point.load()  # the module is imported: this looks its attribute up
        except AttributeError as error:
            raise environment_error(
                entry_point.name,
                "names nothing its module has (fix the entry point in the package's pyproject.toml)",
                error,
            ) from None
        try:
            return target()
        except Exception as error:
            raise environment_error(entry_point.name, "failed to build (its factory raised)", error) from error


def environment_origin(name: str) -> str:
    """Where the registered environment ``name`` comes from, for messages: its entry point and the
    package that declares it, or the factory given to :func:`register_environment`."""
    _discover()
    return _origin(_FACTORIES.get(name))


def _origin(factory: Callable[[], TextEnvironment] | None) -> str:
    if isinstance(factory, _EntryPointFactory):
        return _declared(factory.entry_point)
    if factory is None:
        return "not registered"
    shown = f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', type(factory).__name__)}"
    return f"registered with register_environment, factory {shown}"


def environment_error(
    name: str, problem: str, error: BaseException | None = None, bug: bool = False
) -> EnvironmentLoadError:
    """The one-line refusal of the registered environment ``name``: it, where it comes from
    (:func:`environment_origin`), ``problem``, the ``error`` (type and message) and the fix.

    Args:
        name (str): the registered name.
        problem (str): what went wrong, e.g. "failed to import".
        error (BaseException | None): the exception behind it, if any.
        bug (bool): the environment contradicts itself (its specs, its sizes): a bug of its package, not
            of the command line.

    Returns:
        The :class:`EnvironmentLoadError` to raise.
    """
    _discover()
    factory = _FACTORIES.get(name)
    entry_point = factory.entry_point if isinstance(factory, _EntryPointFactory) else None
    package = _package(entry_point) if entry_point is not None else None
    said = " ".join(str(error).split())  # one line, whatever the error's own layout
    head = f"environment {name!r} ({_origin(factory)})"
    if isinstance(error, ImportError) and "pip install" in said:  # the environment names its extra: it ends the line
        return EnvironmentLoadError(f"{head} needs a package that is not installed: {said}")
    head += f" {problem}" + (f": {type(error).__name__}: {said}" if error is not None else "")
    return EnvironmentLoadError(f"{head}: {_fix(package, entry_point, error, bug)}")


def _fix(package: str | None, entry_point: EntryPoint | None, error: BaseException | None, bug: bool) -> str:
    """What to do about a failing environment, by where it comes from (see :func:`environment_error`)."""
    dist = package.split()[0] if package else None
    ours = dist is not None and dist.replace("-", "_") == "torchrl_glam"  # a built-in environment
    if ours:  # its files, its extras: the error's own words say what to do where they can
        return (
            "a bug in torchrl_glam: please report it"
            if bug
            else "if that names no fix, reinstall torchrl_glam (pip install --force-reinstall torchrl_glam)"
        )
    if bug:
        where = f"the package {package}" if package else "the code given to register_environment"
        fix = f"this is a bug in the environment ({where}), not in the command line: fix it or report it"
        return fix + (f", or uninstall it (pip uninstall {dist})" if dist else "")
    missing = error.name if isinstance(error, ImportError) else None
    if missing and not (entry_point is not None and f"{entry_point.module}.".startswith(f"{missing}.")):
        fix = f"install the missing module {missing!r} (pip install the package that provides it)"
        return fix + (
            f", or reinstall {dist} with its dependencies (pip install --force-reinstall {dist})" if dist else ""
        )
    if dist is None:
        return "fix what the error names, or the factory given to register_environment"
    # its own module missing too: a broken or half-removed install
    return (
        f"fix or reinstall that package (pip install --force-reinstall {dist}), or uninstall it (pip uninstall {dist})"
    )


def register_environment(name: str, factory: Callable[[], TextEnvironment], replace: bool = False) -> None:
    """Makes ``name`` a value of the training config's ``env`` field: ``factory()`` returns the
    :class:`TextEnvironment` (built once, on first use).

    Examples:
        >>> from torchrl_glam.envs import environment_names, get_environment, register_environment
        >>> from torchrl_glam.envs import unregister_environment
        >>> from torchrl_glam.envs.playground import PlaygroundText
        >>> register_environment("my_playground", PlaygroundText)  # a factory: called on first use
        >>> "my_playground" in environment_names()
        True
        >>> type(get_environment("my_playground")).__name__
        'PlaygroundText'
        >>> unregister_environment("my_playground")
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"an environment name must be a non-empty string, not {name!r}")
    _discover()
    if name in _FACTORIES and not replace:
        raise ValueError(f"an environment named {name!r} is already registered (pass replace=True to replace it)")
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def unregister_environment(name: str) -> None:
    """Removes a registered environment (tests, notebooks)."""
    _discover()
    _FACTORIES.pop(name, None)
    _INSTANCES.pop(name, None)


def environment_names() -> list[str]:
    """The registered environment names."""
    _discover()
    return sorted(_FACTORIES)


def get_environment(name: str | TextEnvironment) -> TextEnvironment:
    """The registered environment ``name``; an environment passes through. There is no default:
    ``None`` is refused, naming the registered names. A module or factory that fails raises an
    :class:`EnvironmentLoadError` naming the environment, where it comes from and the fix."""
    if isinstance(name, TextEnvironment):
        return name
    if not isinstance(name, str):  # None, or e.g. a goal catalogue, which arguments took before 0.2.0
        raise TypeError(
            f"environment: expected a TextEnvironment or a registered name ({', '.join(environment_names())}), "
            f"got {type(name).__name__}"
        )
    if name not in _INSTANCES:
        _discover()
        if name not in _FACTORIES:
            raise ValueError(
                f"unknown environment {name!r}; registered: {', '.join(environment_names())} "
                f"(register your own in the entry-point group {ENTRY_POINT_GROUP} of its package, or with "
                "torchrl_glam.envs.register_environment)"
            )
        factory = _FACTORIES[name]
        try:
            environment = factory()
        except EnvironmentLoadError:
            raise
        except Exception as error:  # a factory given to register_environment (an entry point's says its own)
            raise environment_error(name, "failed to build (its factory raised)", error) from error
        if not isinstance(environment, TextEnvironment):
            raise environment_error(
                name, f"returned an instance of {type(environment).__qualname__}, not a TextEnvironment", bug=True
            )
        _INSTANCES[name] = environment
    return _INSTANCES[name]


def environment_or_default(environment: TextEnvironment | None) -> TextEnvironment:
    """``environment`` itself (a :class:`TextEnvironment`; a name is refused with the fix), or, for
    ``None``, the default environment (:data:`DEFAULT_ENVIRONMENT`, the paper's): for the tools whose
    environment argument may be left out."""
    from torchrl_glam.envs.protocol import require_environment

    return get_environment(DEFAULT_ENVIRONMENT) if environment is None else require_environment(environment)


__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ENTRY_POINT_GROUP",
    "EnvironmentLoadError",
    "environment_error",
    "environment_or_default",
    "environment_origin",
    "environment_names",
    "get_environment",
    "register_environment",
    "unregister_environment",
]
