"""Playground-Text's :class:`RenderText`, the text transform of its compact state (``rules.STATE_KEYS``)."""

from __future__ import annotations

from torchrl_glam.envs.playground.catalogue import GoalCatalogue
from torchrl_glam.envs.playground.environment import PlaygroundText
from torchrl_glam.envs.transforms import RenderState


class RenderText(RenderState):
    """:class:`RenderState` for Playground-Text (``catalogue``: its goals, default the shared one)."""

    def __init__(self, catalogue: GoalCatalogue | None = None, next_state: bool = False) -> None:
        super().__init__(PlaygroundText(catalogue), next_state=next_state)
        self.catalogue = self.environment.catalogue


__all__ = ["RenderText"]
