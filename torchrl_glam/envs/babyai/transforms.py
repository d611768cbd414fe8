"""BabyAI-Text's :class:`RenderBabyAIText`, the text transform of its compact state."""

from __future__ import annotations

from torchrl_glam.envs.babyai.environment import BabyAIText
from torchrl_glam.envs.babyai.text import BabyAIGoalCatalogue
from torchrl_glam.envs.transforms import RenderState


class RenderBabyAIText(RenderState):
    """Writes "prompt" and "actions" from BabyAI-Text's compact state (``text=False`` environments,
    replay buffers) in ``wording`` ("glam", the default, or "readable"); with ``next_state=True``
    also under "next" (its "goal_id" is the root's):
    :class:`~torchrl_glam.envs.transforms.RenderState` over this environment."""

    def __init__(
        self,
        catalogue: BabyAIGoalCatalogue | None = None,
        next_state: bool = False,
        history: int = 0,
        wording: str | None = None,
    ) -> None:
        super().__init__(BabyAIText(catalogue=catalogue, history=history, wording=wording), next_state=next_state)
        self.catalogue = self.environment.catalogue


__all__ = ["RenderBabyAIText"]
