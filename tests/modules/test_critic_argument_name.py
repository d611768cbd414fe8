"""The critic's gradient switch has the configs' name, ``critic_backprop``, and one home: the loss
(the heads are plain networks that pass gradient to whatever they read); the dueling head."""

import pytest
import torch

from torchrl_glam.envs import get_environment
from torchrl_glam.modules import make_critic_heads, make_scorer
from torchrl_glam.modules.critic import CriticHead, DuelingCriticHead
from torchrl_glam.objectives.sac_glam import SACGLAMLoss

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def test_the_heads_detach_nothing():
    hidden, prompt = torch.randn(3, 5, 8, requires_grad=True), torch.randn(3, 8, requires_grad=True)
    CriticHead(8, width=4)(hidden).sum().backward()
    DuelingCriticHead(8, width=4)(hidden, prompt, torch.ones(3, 5, dtype=torch.bool)).sum().backward()
    assert hidden.grad.abs().sum() > 0 and prompt.grad.abs().sum() > 0
    assert "critic_backprop" not in CriticHead.__init__.__code__.co_varnames


@pytest.mark.parametrize("critic_backprop", [True, False])
def test_critic_backprop_of_the_loss_decides_whether_the_critic_trains_the_llm(filled_replay, critic_backprop):
    torch.manual_seed(0)
    scorer = make_scorer(None).module
    heads = make_critic_heads(scorer.hidden_size, width=8)
    loss = SACGLAMLoss(scorer, heads, num_actions=5, critic_backprop=critic_backprop, environment=PLAYGROUND)
    llm = loss.param_groups()["llm"]
    grads = torch.autograd.grad(loss(filled_replay.sample(16))["loss_qvalue"], llm, allow_unused=True)
    assert (sum(g.abs().sum().item() for g in grads if g is not None) > 0) == critic_backprop


def test_a_dueling_head_splits_value_and_advantage_over_the_legal_candidates_only():
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
    heads = make_critic_heads(8, width=4, dueling=True)
    assert heads.in_keys == ["action_hidden", "prompt_hidden", "action_mask"]
    with pytest.raises(ValueError, match="critic_input='observation_action'"):
        make_critic_heads(8, "observation", num_actions=5, width=4, dueling=True)
