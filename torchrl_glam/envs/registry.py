"""The names a config's ``env`` field accepts: each a factory of a :class:`TextEnvironment`.

An environment is registered by a package through the entry-point group ``torchrl_glam.environments``
(the built-in ones too), its value the ``module:attribute`` of a class or factory of a
:class:`TextEnvironment`, imported when a config first names it::

    # pyproject.toml of the package that holds MyEnvironment
    [project.entry-points."torchrl_glam.environments"]
    my_env = "my_package.environment:MyEnvironment"

or from Python, in a script (``register_environment("my_env", MyEnvironment)``, then
``main(["env=my_env", ...])``). A config names a registered environment and never an import path,
so nothing the library loads runs code from a config file.
"""

from __future__ import annotations

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
            _FACTORIES.setdefault(name, _loader(*declared.values()))


def _loader(entry_point: EntryPoint, *others: EntryPoint) -> Callable[[], TextEnvironment]:
    def factory() -> TextEnvironment:
        if others:  # two packages claim the name: neither is taken silently for the other
            values = ", ".join(repr(e.value) for e in (entry_point, *others))
            raise ValueError(
                f"the environment {entry_point.name!r} is declared by several entry points ({values}, group "
                f"{ENTRY_POINT_GROUP}): uninstall all but one package, or register the one you mean with "
                "torchrl_glam.envs.register_environment(..., replace=True)"
            )
        try:
            target = entry_point.load()  # an ImportError (a dependency not installed) goes through
        except AttributeError as error:
            raise ValueError(
                f"the entry point {entry_point.name} = {entry_point.value!r} (group {ENTRY_POINT_GROUP}) names "
                f"nothing its module has ({error}): fix it in the pyproject.toml of the package that declares it"
            ) from None
        return target()

    return factory


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
    ``None`` is refused, naming the registered names."""
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
        environment = _FACTORIES[name]()
        if not isinstance(environment, TextEnvironment):
            raise TypeError(
                f"the factory of environment {name!r} returned {type(environment).__name__}, not a TextEnvironment"
            )
        _INSTANCES[name] = environment
    return _INSTANCES[name]


__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ENTRY_POINT_GROUP",
    "environment_names",
    "get_environment",
    "register_environment",
    "unregister_environment",
]
