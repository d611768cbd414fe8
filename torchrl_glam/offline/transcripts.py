"""The pretraining data of the offline models: transcripts of random play in an environment
(:class:`RandomPlayTranscripts`), and the same with hindsight goals (:class:`HindsightTranscripts`,
``offline:tiny-t5-hindsight``: HER applied to random play)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_glam.data.episodes import rollout_episodes
from torchrl_glam.data.her import relabel_episodes
from torchrl_glam.envs import TextEnvironment
from torchrl_glam.offline.recipes import recipe_of, vocabulary_environment


class RandomPlayTranscripts:
    """An endless stream of (prompt, continuation) pairs from a uniformly random policy.

    The environments are shared equally among the goal sets of the environment's
    :class:`~torchrl_glam.offline.recipes.TranscriptRecipe` (Playground-Text: half the simplified
    task set, 3 objects, half the training set, 6 objects, so the model sees both scene sizes);
    episodes last its ``max_steps`` unless ``max_steps`` says otherwise. The targets are the
    environment's ``transcript_targets``. ``environment``: ``None`` is Playground-Text.
    """

    def __init__(
        self,
        num_envs: int = 64,
        seed: int = 0,
        max_steps: int | None = None,
        environment: TextEnvironment | None = None,
    ) -> None:
        self.environment = vocabulary_environment(environment)
        recipe = recipe_of(self.environment)
        goal_sets = recipe.transcript_goal_sets(self.environment)
        max_steps = max_steps or recipe.max_steps
        share = max(num_envs // len(goal_sets), 1)
        self.envs = [
            self.environment.make_env(share, goals=goals, max_steps=max_steps, seed=seed + i)
            for i, goals in enumerate(goal_sets)
        ]
        self.catalogue = self.envs[0].catalogue
        self.tds = [env.reset() for env in self.envs]
        self.generator = torch.Generator().manual_seed(seed)

    def random_step(self, index: int) -> TensorDictBase:
        """One uniformly random legal action in every environment of half ``index``: the step."""
        env, td = self.envs[index], self.tds[index]
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=self.generator).squeeze(-1)
        step, self.tds[index] = env.step_and_maybe_reset(td)
        return step

    @property
    def description(self) -> str:
        """What the stream is, in words (progress messages, the model's pretraining.txt)."""
        return "random-play transcripts"

    def _step(self, index: int) -> tuple[list[str], list[str]]:
        return transcript_pairs(self.random_step(index), self.environment)

    def batch(self, size: int) -> tuple[list[str], list[str]]:
        prompts, targets = [], []
        while len(prompts) < size:
            for index in range(len(self.envs)):
                p, t = self._step(index)
                prompts += p
                targets += t
        order = torch.randperm(len(prompts), generator=self.generator)[:size].tolist()
        return [prompts[i] for i in order], [targets[i] for i in order]


def transcript_pairs(steps: TensorDictBase, environment: TextEnvironment) -> tuple[list[str], list[str]]:
    """(prompts, targets) of a flat batch of environment steps (compact keys, "action", and the
    "next" state and reports): the prompt of the state with its ``goal_id``, and the chosen
    candidate followed by what it did, in the prompt's words (the environment's
    ``transcript_targets``; see the module docstring)."""
    prompts, candidates = environment.render({k: steps[k] for k in environment.state_keys})
    return prompts, environment.transcript_targets(steps, candidates)


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
        environment: TextEnvironment | None = None,
    ) -> None:
        if not 0.0 < hindsight_share <= 1.0:
            raise ValueError(f"hindsight_share={hindsight_share} must be in (0, 1]")
        super().__init__(num_envs, seed, max_steps, environment)
        self.hindsight_share = hindsight_share
        self.window = window
        self.max_steps = max_steps or recipe_of(self.environment).max_steps
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
