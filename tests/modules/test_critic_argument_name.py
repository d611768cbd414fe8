"""The critic head's gradient switch has the configs' name, ``critic_backprop``; the old one warns."""
import pytest
import torch

from torchrl_glam.modules.critic import CriticHead


@pytest.mark.parametrize("critic_backprop", [True, False])
def test_critic_backprop_decides_whether_the_hidden_states_get_gradient(critic_backprop):
    head = CriticHead(8, width=4, critic_backprop=critic_backprop)
    hidden = torch.randn(3, 5, 8, requires_grad=True)
    head(hidden).sum().backward()
    assert (hidden.grad is not None and hidden.grad.abs().sum() > 0) == critic_backprop


def test_the_old_name_still_works_with_a_warning_naming_the_new_one():
    with pytest.warns(FutureWarning, match="critic_backprop"):
        head = CriticHead(8, width=4, backprop_into_llm=False)
    assert head.critic_backprop is False
