"""The critic head's gradient switch has the configs' name, ``critic_backprop``; the dueling head."""

import pytest
import torch

from torchrl_glam.modules.critic import CriticHead


@pytest.mark.parametrize("critic_backprop", [True, False])
def test_critic_backprop_decides_whether_the_hidden_states_get_gradient(critic_backprop):
    head = CriticHead(8, width=4, critic_backprop=critic_backprop)
    hidden = torch.randn(3, 5, 8, requires_grad=True)
    head(hidden).sum().backward()
    assert (hidden.grad is not None and hidden.grad.abs().sum() > 0) == critic_backprop


def test_a_dueling_head_splits_value_and_advantage_over_the_legal_candidates_only():
    from torchrl_glam.modules.critic import DuelingCriticHead

    torch.manual_seed(0)
    head = DuelingCriticHead(8, width=4)
    action_hidden, prompt_hidden = torch.randn(3, 5, 8), torch.randn(3, 8)
    mask = torch.tensor([[True] * 5, [True, True, False, True, True], [False, True, True, False, True]])
    q = head(action_hidden, prompt_hidden, mask)
    # the mean of Q over a state's legal candidates is the state's value V(prompt)
    legal_mean = (q * mask).sum(-1) / mask.sum(-1)
    assert torch.allclose(legal_mean, head.value(prompt_hidden).squeeze(-1), atol=1e-6)
    # a masked candidate's hidden state moves no legal candidate's value
    moved = action_hidden.clone()
    moved[1, 2] += 10.0
    assert torch.allclose(head(moved, prompt_hidden, mask)[1][mask[1]], q[1][mask[1]])


def test_a_dueling_head_needs_the_observation_action_input():
    from torchrl_glam.modules import make_critic_heads

    heads = make_critic_heads(8, width=4, dueling=True)
    assert heads.in_keys == ["action_hidden", "prompt_hidden", "action_mask"]
    with pytest.raises(ValueError, match="critic_input='observation_action'"):
        make_critic_heads(8, "observation", num_actions=5, width=4, dueling=True)
