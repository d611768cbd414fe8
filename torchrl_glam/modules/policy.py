"""The LLM policy as one TensorDict module: ``TensorDictSequential(render?, scorer, actor)``.

The same module acts in the training loops (a sample of the policy), evaluates greedily (under
TorchRL's ``set_exploration_type(ExplorationType.DETERMINISTIC)``: the mode of the masked
categorical), records PPO's behaviour policy (``return_log_prob=True``: "sample_log_prob" and
the candidates' scores), and is the ``policy`` of a stock TorchRL ``Collector``::

    from torchrl.collectors import Collector
    from torchrl_glam.envs.playground import PlaygroundTextEnv, RenderText
    from torchrl_glam.modules import make_policy, make_scorer

    policy = make_policy(make_scorer(None), render=RenderText())
    collector = Collector(PlaygroundTextEnv(num_envs=8, text=False), policy, frames_per_batch=64,
                          total_frames=640, auto_register_policy_transforms=False)

(The policy keeps no state between steps, so it needs no InitTracker: ``False`` keeps TorchRL
0.14's data and silences its warning that 0.15 appends one by default; ``True`` works as well.)

Reads the compact state and "action_mask" (with ``render``; else "prompt", "actions",
"action_mask"); writes "action" (and "sample_log_prob", "action_scores" with
``return_log_prob``). The hidden states and text stay inside the call (``selected_out_keys``), so
a collector stores integers only.
"""

from __future__ import annotations

from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from torchrl_glam.modules.actor import make_actor
from torchrl_glam.modules.scoring import SCORES_KEY

#: Where the policy writes the log-probability of its action (PPO's behaviour policy).
LOG_PROB_KEY = "sample_log_prob"
#: The candidates' scores when the action was taken: the behaviour policy's logits (PPO's KL loss).
BEHAVIOUR_SCORES_KEY = "behaviour_scores"


def make_policy(
    scorer: TensorDictModuleBase,
    render: TensorDictModuleBase | None = None,
    return_log_prob: bool = False,
    action_key: str = "action",
) -> TensorDictSequential:
    """``scorer``: the TensorDict scorer (:func:`make_scorer`); ``render``: a module or transform
    writing its text keys from the state (e.g. ``torchrl_glam.envs.playground.RenderText()``), or ``None``
    when the input already carries text."""
    actor = make_actor(action_key=action_key, return_log_prob=return_log_prob, log_prob_key=LOG_PROB_KEY)
    modules = ([render] if render is not None else []) + [scorer, actor]
    out = [action_key] + ([LOG_PROB_KEY, SCORES_KEY] if return_log_prob else [])
    return TensorDictSequential(*modules, selected_out_keys=out)
