"""SAC-GLAM's loss through the training agent factory: which loss trains what (App. B's critic
designs x whether the critic's gradient reaches the LLM), on n-step HER transitions of random play."""

import pytest
import torch

from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config


def llm_grad_norm(agent, loss):
    params = agent.llm_parameters()
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return sum(g.abs().sum().item() for g in grads if g is not None)


@pytest.mark.parametrize("critic_input", ["observation_action", "observation"])
def test_gradient_paths_of_the_losses(filled_replay, critic_input):
    torch.manual_seed(0)
    batch = filled_replay.sample(32)
    for backprop in (True, False):
        cfg = make_config("smoke", {"critic_input": critic_input, "critic_backprop": backprop})
        agent = make_loss(cfg, num_actions=5)
        out = agent(batch)
        critic_to_llm = llm_grad_norm(agent, out["loss_qvalue"])
        assert (critic_to_llm > 0) == backprop, (critic_input, backprop, critic_to_llm)
        assert llm_grad_norm(agent, out["loss_actor"]) > 0  # the actor learns through the scores
        heads = torch.autograd.grad(out["loss_actor"], agent.head_parameters(), allow_unused=True)
        assert all(g is None or g.abs().sum() == 0 for g in heads)  # the actor loss leaves Q alone
        assert out["td_error"].shape == (32,)
