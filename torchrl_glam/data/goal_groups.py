"""The groups a learning-progress curriculum estimates progress over (the config's ``lp_groups``).

Apart from :mod:`~torchrl_glam.data.curriculum` because it imports no torch: a config is checked
against these names before torch loads."""

from __future__ import annotations

from collections.abc import Sequence

GROUP_ATTRIBUTES = ("type", "category", "colour")


def parse_groups(groups: str | Sequence[str]) -> tuple[str, ...]:
    """ "type,category" -> ("type", "category"); "goal": one group per goal. Bad names raise."""
    names = tuple(g.strip() for g in (groups.split(",") if isinstance(groups, str) else groups) if g.strip())
    if names == ("goal",):
        return names
    bad = [n for n in names if n not in GROUP_ATTRIBUTES]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(
            f"bad goal grouping {groups!r}: give 'goal' (one group per goal) or distinct names among "
            f"{GROUP_ATTRIBUTES}, comma-separated (e.g. 'type,category')"
        )
    return names


__all__ = ["GROUP_ATTRIBUTES", "parse_groups"]
