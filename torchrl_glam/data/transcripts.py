"""The hindsight pretraining transcripts (``offline:tiny-t5-hindsight``): HER applied to random play.

The stream lives here, beside HER, because it relabels episodes; the pretraining that reads it is
in :mod:`torchrl_glam.modules.pretraining`, a room below this one, which finds it by its name
("hindsight") in its registry of transcript streams: importing this module registers it.
"""

from __future__ import annotations

import torch

from torchrl_glam.data.episodes import rollout_episodes
from torchrl_glam.data.her import relabel_episodes
from torchrl_glam.modules.pretraining import (
    HINDSIGHT_SHARE,
    RandomPlayTranscripts,
    register_transcript_stream,
    transcript_pairs,
)


class HindsightTranscripts(RandomPlayTranscripts):
    """Random-play transcripts, a share of them with a *hindsight* goal line: the goal the social
    partner reported later in the same episode (HER's "future" relabeling, :mod:`torchrl_glam.data.her`,
    applied to the random policy's episodes), so that the goal names what the random actions went on
    to do. The actions are still the random policy's, unchanged: what the model can learn is which
    actions come before a goal is reached ("Go to red cat" before "Grasp any animal"), the link
    between a goal's words and the objects it names that random transcripts cannot teach.

    The other ``1 - hindsight_share`` of each batch is :class:`RandomPlayTranscripts`' stream,
    unchanged. Only goals of the environments' own task sets are reported, so held-out goals are
    never shown. ``window``: keep only the last ``window`` steps before each report (``None``: the
    whole section, HER's "future"; the shipped model's choice).
    """

    def __init__(
        self,
        num_envs: int = 64,
        seed: int = 0,
        max_steps: int | None = None,
        hindsight_share: float = 0.5,
        window: int | None = None,
        environment=None,
    ) -> None:
        if not 0.0 < hindsight_share <= 1.0:
            raise ValueError(f"hindsight_share={hindsight_share} must be in (0, 1]")
        super().__init__(num_envs, seed, max_steps, environment)
        self.hindsight_share = hindsight_share
        self.window = window
        self.max_steps = max_steps or self.environment.pretraining_max_steps
        # their own environments, so the plain stream above is exactly RandomPlayTranscripts'
        self.hindsight = RandomPlayTranscripts(num_envs, seed + 1_000, max_steps, self.environment)
        self.pool: tuple[list[str], list[str]] = ([], [])

    @property
    def description(self) -> str:
        window = "" if self.window is None else f", the last {self.window} steps before each report"
        return f"random-play transcripts, {self.hindsight_share:g} of them with hindsight goals{window}"

    def _refill(self) -> None:
        source = self.hindsight
        prompts, targets = [], []
        for index in range(len(source.envs)):
            steps = torch.stack([source.random_step(index) for _ in range(self.max_steps)], dim=1)
            episodes = rollout_episodes(steps, self.max_steps)
            relabeled = relabel_episodes(episodes, generator=source.generator)
            if len(relabeled):
                keep = relabeled["mask"]
                if self.window is not None:  # only the last `window` steps before the report
                    end = keep.sum(1, keepdim=True) - 1
                    keep = keep & (end - torch.arange(keep.shape[1]) < self.window)
                p, t = transcript_pairs(relabeled[keep], self.environment)
                prompts += p
                targets += t
        order = torch.randperm(len(prompts), generator=self.generator).tolist()
        self.pool = ([prompts[i] for i in order], [targets[i] for i in order])

    def batch(self, size: int) -> tuple[list[str], list[str]]:
        hindsight = round(size * self.hindsight_share)
        prompts, targets = super().batch(size - hindsight) if hindsight < size else ([], [])
        while len(self.pool[0]) < hindsight:
            pool = self.pool
            self._refill()
            self.pool = (pool[0] + self.pool[0], pool[1] + self.pool[1])
        prompts, targets = prompts + self.pool[0][:hindsight], targets + self.pool[1][:hindsight]
        self.pool = (self.pool[0][hindsight:], self.pool[1][hindsight:])
        order = torch.randperm(size, generator=self.generator).tolist()
        return [prompts[i] for i in order], [targets[i] for i in order]


register_transcript_stream(
    "hindsight",
    lambda seed, environment: HindsightTranscripts(seed=seed, hindsight_share=HINDSIGHT_SHARE, environment=environment),
)
