"""Playground-Text's :class:`RenderText`, the text transform of its compact state (``rules.STATE_KEYS``)."""

from __future__ import annotations

from torchrl_glam.envs.playground.catalogue import GoalCatalogue
from torchrl_glam.envs.playground.environment import PlaygroundText
from torchrl_glam.envs.transforms import RenderState


class RenderText(RenderState):
    """:class:`RenderState` for Playground-Text (``catalogue``: its goals, default the shared one).

    Examples:
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv, RenderText
        >>> env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0, text=False)  # tensors only
        >>> td = TransformedEnv(env, RenderText()).reset()  # the text, rendered from the compact state
        >>> td["prompt"][0].splitlines()[0], td["actions"][0][-2:]
        ('Goal: Grow blue lion', ['Grasp', 'Release'])
        >>> "prompt" in env.reset().keys()  # the environment alone
        False
    """

    def __init__(self, catalogue: GoalCatalogue | None = None, next_state: bool = False) -> None:
        super().__init__(PlaygroundText(catalogue), next_state=next_state)
        self.catalogue = self.environment.catalogue


__all__ = ["RenderText"]
