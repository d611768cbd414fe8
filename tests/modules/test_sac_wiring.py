"""Actor, critic heads and DiscreteSACLoss on the scorer's outputs: the four critic designs of
App. B, the gradient paths into the LoRA weights, and target copies that never touch the LLM."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives import DiscreteSACLoss, SoftUpdate

from torchrl_glam.modules import CriticHead, make_actor, make_critic_heads, make_scorer
from torchrl_glam.modules.loading import LLMConfig

NUM_OBJECTS = 3
NUM_ACTIONS = NUM_OBJECTS + 2
DESIGNS = [
    (critic_input, backprop) for critic_input in ("observation_action", "observation") for backprop in (True, False)
]


def transitions(playground_batch, batch_size=4):
    """A batch of transitions with a masked candidate in the observation and in the next one."""

    def observation(seed):
        prompts, actions, mask = playground_batch(batch_size, NUM_OBJECTS, seed=seed, uneven=True)
        mask[0, 1] = False
        td = TensorDict(batch_size=[batch_size])
        td.set("prompt", prompts)
        td.set("actions", actions)
        td.set("action_mask", mask)
        return td

    data = observation(0)
    data["action"] = torch.tensor([0, 2, 3, 4][:batch_size])
    data["next"] = observation(1)
    data["next", "reward"] = torch.tensor([[1.0], [0.0], [0.0], [1.0]][:batch_size])
    data["next", "done"] = data["next", "reward"].bool()
    data["next", "terminated"] = data["next", "done"].clone()
    return data


def build(path, critic_input="observation_action"):
    scorer = make_scorer(LLMConfig(str(path), lora_rank=4))
    heads = make_critic_heads(scorer.module.hidden_size, critic_input=critic_input, num_actions=NUM_ACTIONS, width=32)
    loss = DiscreteSACLoss(make_actor(), heads, action_space="categorical", num_actions=NUM_ACTIONS, num_qvalue_nets=2)
    return scorer, heads, loss


def score(scorer, data):
    scorer(data)
    with torch.no_grad():
        scorer(data["next"])
    return data


def lora_gradient(scorer):
    """Total |grad| of the LoRA B matrices (the A gradients are 0 at init, as B starts at 0)."""
    grads = [p.grad for n, p in scorer.named_parameters() if "lora_B" in n]
    return sum(float(g.abs().sum()) for g in grads if g is not None)


@pytest.mark.parametrize("critic_input,backprop", DESIGNS)
def test_critic_gradient_reaches_lora_only_with_backprop(kind, tiny_paths, playground_batch, critic_input, backprop):
    scorer, heads, loss = build(tiny_paths[kind], critic_input)
    data = score(scorer, transitions(playground_batch))
    if not backprop:  # the heads detach nothing: the loss does, as SACGLAMLoss(critic_backprop=False)
        for key in heads.in_keys:
            data[key] = data[key].detach()
    loss_qvalue, _ = loss.qvalue_loss(data)
    assert torch.isfinite(loss_qvalue)
    loss_qvalue.backward()
    head_grad = sum(
        float(p.grad.abs().sum()) for p in loss.qvalue_network_params.values(True, True) if p.grad is not None
    )
    assert head_grad > 0
    assert (lora_gradient(scorer) > 0) == backprop


def test_actor_loss_reaches_lora_through_the_scores(kind, tiny_paths, playground_batch):
    scorer, _, loss = build(tiny_paths[kind])
    data = score(scorer, transitions(playground_batch))
    # Detached hidden states: the actor's gradient can only flow through "action_scores".
    actor_data = data.clone(False)
    actor_data["action_hidden"] = data["action_hidden"].detach()
    actor_data["prompt_hidden"] = data["prompt_hidden"].detach()
    loss_actor, metadata = loss.actor_loss(actor_data)
    assert torch.isfinite(loss_actor) and torch.isfinite(metadata["log_prob"]).all()
    loss_actor.backward()
    assert lora_gradient(scorer) > 0
    scorer.zero_grad()
    actor_data["action_scores"] = data["action_scores"].detach()
    assert not loss.actor_loss(actor_data)[0].requires_grad


def test_sac_loss_trains_heads_and_never_copies_the_llm(kind, tiny_paths, playground_batch):
    scorer = make_scorer(LLMConfig(str(tiny_paths[kind]), lora_rank=4))
    llm_before = {name: value.clone() for name, value in scorer.state_dict().items()}
    heads = make_critic_heads(scorer.module.hidden_size, width=32)
    loss = DiscreteSACLoss(make_actor(), heads, action_space="categorical", num_actions=NUM_ACTIONS, num_qvalue_nets=2)
    updater = SoftUpdate(loss, tau=0.5)
    head_size = sum(p.numel() for p in heads.parameters())
    llm_pointers = {p.data_ptr() for p in scorer.parameters()}
    assert not llm_pointers & {p.data_ptr() for p in loss.parameters()}
    assert sum(p.numel() for p in loss.qvalue_network_params.values(True, True)) == 2 * head_size
    assert sum(p.numel() for p in loss.target_qvalue_network_params.values(True, True)) == 2 * head_size

    data = score(scorer, transitions(playground_batch))
    losses = loss(data)
    assert all(torch.isfinite(losses[key]) for key in ("loss_actor", "loss_qvalue", "loss_alpha"))
    (losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]).backward()
    torch.optim.SGD(loss.parameters(), lr=0.1).step()  # heads and alpha only
    updater.step()
    for name, value in scorer.state_dict().items():
        assert torch.equal(value, llm_before[name]), name
    assert lora_gradient(scorer) > 0  # ...while the LLM did receive its gradient


def test_heads_shapes_and_errors():
    hidden = torch.randn(2, 7, 5, 16)
    assert CriticHead(16, width=8)(hidden).shape == (2, 7, 5)
    assert CriticHead(16, "observation", num_actions=5, width=8)(hidden[:, :, 0]).shape == (2, 7, 5)
    with pytest.raises(ValueError, match="give num_actions"):
        CriticHead(16, "observation")
    with pytest.raises(ValueError, match="critic_input"):
        CriticHead(16, "action")
    head = make_critic_heads(16, "observation", num_actions=5)
    assert head.in_keys == ["prompt_hidden"] and head.out_keys == ["action_value"]
    assert [m.out_features for m in head.module.mlp if isinstance(m, torch.nn.Linear)] == [1024, 1024, 5]
