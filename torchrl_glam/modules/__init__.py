"""The LLM side of SAC-GLAM: loading models, the scorer, the actor and the critic heads.

Wiring in a plain TorchRL script (the loss never sees the LLM, only the scorer's outputs)::

    from torchrl.objectives import DiscreteSACLoss, SoftUpdate
    from torchrl_glam.modules import LLMConfig, make_actor, make_critic_heads, make_scorer

    scorer = make_scorer(LLMConfig("google/flan-t5-base", lora_rank=16, quantization="4bit"))
    # or make_scorer(None): the offline tiny T5
    actor = make_actor()                      # "action_scores", "action_mask" -> "action"
    heads = make_critic_heads(scorer.module.hidden_size)   # "action_hidden" -> "action_value"
    loss = DiscreteSACLoss(actor, heads, action_space="categorical",
                           num_actions=num_candidates, num_qvalue_nets=2)
    target_updater = SoftUpdate(loss, tau=0.005)           # copies the heads only

    # acting: the scorer writes "action_scores", "action_hidden", "prompt_hidden"
    with torch.no_grad():
        actor(scorer(env_tensordict))
    # training on a sampled batch with "prompt", "actions", "action_mask" and ("next", ...):
    scorer(batch)                        # with grad: the losses reach the LLM through these
    with torch.no_grad():
        scorer(batch["next"])            # targets
    losses = loss(batch)
    optimisers: scorer.parameters() (LoRA) for the actor, loss.qvalue_network_params for the heads

Note: ``DiscreteSACLoss.actor_loss`` evaluates the heads on the same hidden states as the critic
loss; with ``critic_backprop=True`` its ``-min Q`` term would also push gradient into the LLM
through them. To keep the policy gradient to the scores only, compute ``loss.actor_loss`` on a
copy of the batch whose hidden-state keys are detached.
"""

from torchrl_glam.modules.actor import MASKED_LOGIT, make_actor
from torchrl_glam.modules.agent import GLAMAgent
from torchrl_glam.modules.critic import (
    ACTION_VALUE_KEY,
    VALUE_KEY,
    CriticHead,
    DuelingCriticHead,
    make_critic_heads,
    make_value_head,
)
from torchrl_glam.modules.loading import LLMConfig, LoadedLLM, ModelNotFoundError, load_llm
from torchrl_glam.modules.policy import LOG_PROB_KEY, make_policy
from torchrl_glam.modules.scoring import (
    ACTION_HIDDEN_KEY,
    ACTION_MASK_KEY,
    ACTIONS_KEY,
    PROMPT_HIDDEN_KEY,
    PROMPT_KEY,
    SCORES_KEY,
    LLMScorer,
    make_scorer,
)
from torchrl_glam.offline.models import OfflineModelNotBuilt

__all__ = [
    "ACTION_HIDDEN_KEY",
    "ACTION_MASK_KEY",
    "ACTION_VALUE_KEY",
    "ACTIONS_KEY",
    "LOG_PROB_KEY",
    "MASKED_LOGIT",
    "PROMPT_HIDDEN_KEY",
    "PROMPT_KEY",
    "SCORES_KEY",
    "CriticHead",
    "DuelingCriticHead",
    "GLAMAgent",
    "LLMConfig",
    "LLMScorer",
    "LoadedLLM",
    "ModelNotFoundError",
    "OfflineModelNotBuilt",
    "load_llm",
    "make_actor",
    "make_critic_heads",
    "make_value_head",
    "VALUE_KEY",
    "make_policy",
    "make_scorer",
]
