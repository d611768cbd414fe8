"""The actor of SAC-GLAM: a categorical distribution over the candidates whose logits are the LLM's
scores (paper eq. 2), with illegal candidates masked out.

The actor has no parameters of its own: the policy's parameters are the LLM's, and the scores it
reads were computed (with their autograd graph) by the scorer before the actor runs, so the actor
loss reaches the LLM (or its LoRA weights) through them.
"""

from __future__ import annotations

from torch import nn

from torchrl_glam.modules.scoring import ACTION_MASK_KEY, SCORES_KEY

#: Log-probability given to masked candidates. TorchRL's default is -inf, which turns the SAC losses
#: into NaN (0 * -inf in their expectations over candidates); a finite value gives probability 0.
MASKED_LOGIT = -1e9


def make_actor(
    scores_key: str = SCORES_KEY,
    mask_key: str = ACTION_MASK_KEY,
    action_key: str = "action",
    one_hot: bool = False,
    return_log_prob: bool = False,
    spec=None,
    neg_inf: float = MASKED_LOGIT,
    log_prob_key: str | None = None,
):
    """A ``ProbabilisticActor`` sampling ``"action"`` from ``MaskedCategorical(logits=scores, mask=mask)``.

    Reads ``"action_scores"`` [*B, A] and ``"action_mask"`` [*B, A]; writes ``"action"`` (an index,
    or a one-hot vector with ``one_hot=True``) and, with ``return_log_prob``, its log-probability
    (under ``log_prob_key``; TorchRL's default name when ``None``).
    """
    from tensordict.nn import InteractionType, TensorDictModule
    from torchrl.modules import MaskedCategorical, MaskedOneHotCategorical, ProbabilisticActor

    # ProbabilisticActor needs a module producing the distribution's parameters: the scores are
    # already the logits, so it is the identity.
    logits = TensorDictModule(nn.Identity(), in_keys=[scores_key], out_keys=["action_logits"])
    return ProbabilisticActor(
        logits,
        in_keys={"logits": "action_logits", "mask": mask_key},
        out_keys=[action_key],
        spec=spec,
        distribution_class=MaskedOneHotCategorical if one_hot else MaskedCategorical,
        distribution_kwargs={"neg_inf": neg_inf},
        return_log_prob=return_log_prob,
        **({"log_prob_key": log_prob_key} if log_prob_key is not None else {}),
        default_interaction_type=InteractionType.RANDOM,
    )
