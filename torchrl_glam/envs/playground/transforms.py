"""Playground-Text's compact state keys, and :class:`RenderText`, the text transform of its state."""

from __future__ import annotations

from torchrl_glam.envs.playground.catalogue import GoalCatalogue
from torchrl_glam.envs.transforms import RenderState

#: The compact state of an observation, in ``render_batch``'s order. ``goal_id`` and ``objects``
#: do not change within an episode: a transition keeps them once, at its root.
STATE_KEYS = ("goal_id", "objects", "agent_on", "held", "grown")
#: The keys that change from step to step (also under "next" in a transition).
STEP_STATE_KEYS = ("agent_on", "held", "grown")


class RenderText(RenderState):
    """:class:`RenderState` for Playground-Text (``catalogue``: its goals, default the shared one)."""

    def __init__(self, catalogue: GoalCatalogue | None = None, next_state: bool = False) -> None:
        from torchrl_glam.envs.playground.environment import PlaygroundText  # it imports this module

        super().__init__(PlaygroundText(catalogue), next_state=next_state)
        self.catalogue = self.environment.catalogue


__all__ = ["RenderText", "STATE_KEYS", "STEP_STATE_KEYS"]
