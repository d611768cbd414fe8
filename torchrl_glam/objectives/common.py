"""What every GLAM objective does first: render a batch of compact states and score it.

The replay buffers and rollouts hold compact integer states (``torchrl_glam.data``); the LLM
needs text. Both SAC-GLAM and PPO-GLAM go through :func:`score_states`, so the prompts an agent is
trained on are exactly those it acted on.
"""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_glam.envs import GoalCatalogue, action_mask_from_held, render_batch  # the env's mask rule
from torchrl_glam.modules import ACTION_HIDDEN_KEY, ACTIONS_KEY, PROMPT_HIDDEN_KEY, PROMPT_KEY, SCORES_KEY, LLMScorer


def render_observations(goal_id, objects, agent_on, held, grown, catalogue=None):
    """Prompts [B], candidates [B][A] and action mask [B, A] of compact states."""
    prompts, actions = render_batch(goal_id, objects, agent_on, held, grown, catalogue)
    return prompts, actions, action_mask_from_held(held, objects.shape[-1] + 2)


def score_states(
    scorer: LLMScorer, batch: TensorDictBase, next_obs: bool = False, catalogue: GoalCatalogue | None = None
) -> dict[str, torch.Tensor]:
    """Scores and hidden states of the observations of a flat batch of compact transitions
    (``next_obs``: of the states under "next", with the same goal and objects).

    A batch that already carries its text ("prompt", "actions", e.g. sampled from a replay buffer
    with the ``RenderText(next_state=True)`` transform) is scored as it is; otherwise the text is
    rendered here from the compact state."""
    prefix = ("next",) if next_obs else ()
    state = [batch[prefix + (k,)].cpu() for k in ("agent_on", "held", "grown")]  # text is rendered on CPU
    if prefix + (PROMPT_KEY,) in batch.keys(True) and prefix + (ACTIONS_KEY,) in batch.keys(True):
        prompts, actions = batch[prefix + (PROMPT_KEY,)], batch[prefix + (ACTIONS_KEY,)]
        mask = action_mask_from_held(state[1], batch["objects"].shape[-1] + 2)
    else:
        prompts, actions, mask = render_observations(batch["goal_id"].cpu(), batch["objects"].cpu(), *state,
                                                     catalogue=catalogue)
    mask = mask.to(batch["goal_id"].device)
    scores, action_hidden, prompt_hidden = scorer(prompts, actions, mask)
    return {SCORES_KEY: scores, "action_mask": mask, ACTION_HIDDEN_KEY: action_hidden, PROMPT_HIDDEN_KEY: prompt_hidden}


class TrainableState:
    """Checkpoints of a GLAM objective (an ``nn.Module``) without the frozen LLM weights: with LoRA
    the adapters, plus the heads, targets and the loss's own state (alpha, KL coefficient); the
    frozen base model comes back from its hub name or path."""

    def _frozen_names(self) -> set[str]:
        return {name for name, p in self.named_parameters() if not p.requires_grad}

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        frozen = self._frozen_names()
        return {k: v for k, v in self.state_dict().items() if k not in frozen}

    def load_trainable_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing, unexpected = self.load_state_dict(state, strict=False)
        if unexpected or set(missing) - self._frozen_names():
            raise ValueError(
                f"checkpoint does not fit this agent: missing {sorted(set(missing) - self._frozen_names())[:5]}, "
                f"unexpected {unexpected[:5]} (was it written with another model or critic design?)"
            )
