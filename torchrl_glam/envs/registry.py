"""The names a config's ``env`` field accepts: each a factory of a :class:`TextEnvironment`.

Registration is Python only: a config names a registered environment and never an import path,
so nothing the library loads runs code from a config file::

    from torchrl_glam.envs import register_environment
    register_environment("my_env", MyEnvironment)  # then: main(["env=my_env", ...])
"""

from __future__ import annotations

from collections.abc import Callable

from torchrl_glam.envs.protocol import TextEnvironment

#: The environment of a config that names none (the paper's)
DEFAULT_ENVIRONMENT = "playground"


_FACTORIES: dict[str, Callable[[], TextEnvironment]] = {}
_INSTANCES: dict[str, TextEnvironment] = {}


def register_environment(name: str, factory: Callable[[], TextEnvironment], replace: bool = False) -> None:
    """Makes ``name`` a value of the training config's ``env`` field: ``factory()`` returns the
    :class:`TextEnvironment` (built once, on first use)."""
    if not name or not isinstance(name, str):
        raise ValueError(f"an environment name must be a non-empty string, not {name!r}")
    if name in _FACTORIES and not replace:
        raise ValueError(f"an environment named {name!r} is already registered (pass replace=True to replace it)")
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def unregister_environment(name: str) -> None:
    """Removes a registered environment (tests, notebooks)."""
    _FACTORIES.pop(name, None)
    _INSTANCES.pop(name, None)


def environment_names() -> list[str]:
    """The registered environment names."""
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
        if name not in _FACTORIES:
            raise ValueError(
                f"unknown environment {name!r}; registered: {', '.join(environment_names())} "
                "(register your own with torchrl_glam.envs.register_environment)"
            )
        environment = _FACTORIES[name]()
        if not isinstance(environment, TextEnvironment):
            raise TypeError(
                f"the factory of environment {name!r} returned {type(environment).__name__}, not a TextEnvironment"
            )
        _INSTANCES[name] = environment
    return _INSTANCES[name]


def _playground() -> TextEnvironment:
    from torchrl_glam.envs.playground.environment import PlaygroundText

    return PlaygroundText()


def _babyai() -> TextEnvironment:
    from torchrl_glam.envs.babyai.environment import BabyAIText  # imports minigrid: only when chosen

    return BabyAIText()


register_environment("playground", _playground)
register_environment("babyai", _babyai)

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "environment_names",
    "get_environment",
    "register_environment",
    "unregister_environment",
]
