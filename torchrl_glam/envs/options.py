"""An environment's own settings: :class:`EnvOption`, declared by a
:class:`~torchrl_glam.envs.protocol.TextEnvironment` in its ``options``.

A config's ``env.options`` holds the chosen environment's options and nothing else: the config
types each value with its declaration, checks it against the declared bounds, and refuses an
option the environment does not declare, all in one line naming the environment. A package that
registers an environment declares its options the same way, with nothing of the library edited.
Imports without torch, like the protocol (a command line is checked before torch loads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin


@dataclass(frozen=True)
class EnvOption:
    """One option of an environment.

    Args:
        name (str): the option's name, under ``env.options`` in a config (``env.options.history=2``;
            on a command line ``history=2`` when no config field has that name).
        type (Any): its type hint: ``int``, ``float``, ``bool``, ``str``, ``list[str]``, or one of
            those ``| None``.
        default (Any): its value when a config does not set it.
        help (str): what it does, shown by ``--help`` and the docs.
        choices (Sequence): the values a ``str`` option, or the items of a ``list`` option, may
            take; empty: any.
        minimum (float | None): the least value of a number (``None``: no bound).
        maximum (float | None): the largest value of a number (``None``: no bound).
        state (bool): the option changes the compact state or the prompts: it is given to
            :meth:`~torchrl_glam.envs.protocol.TextEnvironment.with_options`; otherwise to
            :meth:`~torchrl_glam.envs.protocol.TextEnvironment.make_env`.

    Examples:
        >>> from torchrl_glam.envs import EnvOption
        >>> history = EnvOption("history", int, 0, "past observations in the prompt", minimum=0, maximum=4, state=True)
        >>> history.problem(2) is None, history.problem(9)
        (True, 'an integer from 0 to 4')
        >>> kinds = EnvOption("kinds", list[str] | None, None, "task kinds", choices=("goto", "open"))
        >>> kinds.problem(["goto", "goto"])
        "none, or a non-empty list of distinct values among ('goto', 'open')"
    """

    name: str
    type: Any
    default: Any
    help: str
    choices: Sequence[Any] = ()
    minimum: float | None = None
    maximum: float | None = None
    state: bool = False

    @property
    def optional(self) -> bool:
        """Whether ``None`` is a value of it."""
        return type(None) in get_args(self.type)

    @property
    def kind(self) -> Any:
        """Its type without ``None``."""
        if get_origin(self.type) is Union or self.optional:
            return next(arg for arg in get_args(self.type) if arg is not type(None))
        return self.type

    def problem(self, value: Any) -> str | None:
        """What a good value is, when ``value`` (of the option's type) is out of its bounds or
        choices; ``None`` when it is good."""
        if value is None:
            return None if self.optional else self.expected()
        if get_origin(self.kind) is list:
            good = len(value) >= 1 and len(set(value)) == len(value)
            good = good and (not self.choices or set(value) <= set(self.choices))
        else:
            good = not self.choices or value in self.choices
            good = good and (self.minimum is None or value >= self.minimum)
            good = good and (self.maximum is None or value <= self.maximum)
        return None if good else self.expected()

    def expected(self) -> str:
        """The words of a good value, as a refusal ends ("expected ...")."""
        none = "none, or " if self.optional else ""
        if get_origin(self.kind) is list:
            among = f" among {tuple(self.choices)}" if self.choices else ""
            return f"{none}a non-empty list of distinct values{among}"
        if self.choices:
            return f"{none}one of {tuple(self.choices)}"
        noun = {int: "an integer", float: "a number", bool: "true or false", str: "text"}.get(self.kind, "a value")
        if self.minimum is not None and self.maximum is not None:
            return f"{none}{noun} from {_number(self.minimum)} to {_number(self.maximum)}"
        if self.minimum is not None:
            return f"{none}{noun} >= {_number(self.minimum)}"
        if self.maximum is not None:
            return f"{none}{noun} <= {_number(self.maximum)}"
        return f"{none}{noun}"


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


__all__ = ["EnvOption"]
