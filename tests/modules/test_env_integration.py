"""The modules on the real environment: act with scorer + actor, then one SAC loss on the rollout."""

import torch
from tensordict.nn import TensorDictSequential
from torchrl.objectives import DiscreteSACLoss

from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.modules import LLMConfig, make_actor, make_critic_heads, make_scorer


def test_rollout_then_sac_loss_on_playground_text(tiny_paths):
    env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0)
    num_actions = env.action_spec.space.n
    scorer = make_scorer(LLMConfig(str(tiny_paths["t5"]), lora_rank=4))
    actor = make_actor(spec=env.action_spec)
    with torch.no_grad():
        rollout = env.rollout(4, TensorDictSequential(scorer, actor), break_when_any_done=False)
    assert rollout["action_scores"].shape == (2, 4, num_actions)
    assert rollout["action_mask"].gather(-1, rollout["action"][..., None]).all()  # only legal actions

    # Training-time scoring of the whole [env, time] batch, as after sampling a replay buffer.
    batch = rollout.exclude("action_scores", "action_hidden", "prompt_hidden")
    scorer(batch)
    with torch.no_grad():
        scorer(batch["next"])
    heads = make_critic_heads(scorer.module.hidden_size, width=32)
    loss = DiscreteSACLoss(actor, heads, action_space="categorical", num_actions=num_actions, num_qvalue_nets=2)
    losses = loss(batch)
    (losses["loss_actor"] + losses["loss_qvalue"]).backward()
    assert torch.isfinite(losses["loss_qvalue"]) and torch.isfinite(losses["loss_actor"])
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in scorer.named_parameters() if "lora_B" in n)
