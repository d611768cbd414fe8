"""PPO-GLAM on ClipPPOLoss and GAE: hand-computed advantages and losses, the first-epoch ratio."""
import pytest
import torch

from torchrl_glam.modules import make_scorer
from torchrl_glam.objectives.common import score_states
from torchrl_glam.objectives.ppo_glam import PPOGLAMLoss
from torchrl_glam.training.config import make_config
from torchrl_glam.training.factories import act, make_env

GAMMA, LMBDA = 0.9, 0.5


@pytest.fixture(scope="module")
def loss():
    torch.manual_seed(0)
    return PPOGLAMLoss(make_scorer(None).module, gamma=GAMMA, lmbda=LMBDA, value_width=32)


def rollout(loss, num_envs=4, steps=6, seed=0):
    """A real rollout [B, T] of the simplified environment with the policy's log-probs."""
    env = make_env(make_config("smoke"), num_envs=num_envs, seed=seed)
    td = env.reset()
    torch.manual_seed(seed)
    steps_out = []
    for _ in range(steps):
        act(loss, td, with_log_prob=True)
        step, td = env.step_and_maybe_reset(td)
        steps_out.append(step.select("goal_id", "objects", "agent_on", "held", "grown", "action",
                                     "sample_log_prob", ("next", "agent_on"), ("next", "held"),
                                     ("next", "grown"), ("next", "reward"), ("next", "done"),
                                     ("next", "terminated")))
    return torch.stack(steps_out, dim=1)


def test_gae_matches_a_hand_computation():
    loss = PPOGLAMLoss(make_scorer(None).module, gamma=GAMMA, lmbda=LMBDA, value_width=32)
    data = rollout(loss, num_envs=1, steps=3)
    data["next", "reward"] = torch.tensor([[[0.0], [0.0], [1.0]]])
    data["next", "done"] = torch.tensor([[[False], [False], [True]]])
    data["next", "terminated"] = data["next", "done"].clone()
    c = 0.25  # a constant value function: last layer zero, bias c
    last = [m for m in loss.value.module.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(c)
    out = loss.advantages(data)
    d0 = d1 = GAMMA * c - c
    d2 = 1.0 - c  # terminal: no bootstrap
    a2 = d2
    a1 = d1 + GAMMA * LMBDA * a2
    a0 = d0 + GAMMA * LMBDA * a1
    assert out["advantage"].reshape(-1).tolist() == pytest.approx([a0, a1, a2], abs=1e-6)
    assert out["value_target"].reshape(-1).tolist() == pytest.approx([a0 + c, a1 + c, a2 + c], abs=1e-6)


def test_first_epoch_ratio_is_one_and_losses_match_their_formulas(loss):
    data = loss.advantages(rollout(loss)).reshape(-1)
    out = loss(data)
    assert out["ratio"].item() == pytest.approx(1.0, abs=1e-4)  # the policy that collected = the one scored
    assert out["clip_fraction"].item() == 0.0
    # ratio 1: the clipped surrogate is -mean(advantage)
    assert out["loss_objective"].item() == pytest.approx(-data["advantage"].mean().item(), abs=1e-4)
    with torch.no_grad():  # the value of the rescored prompts
        value = loss.value.module(score_states(loss.scorer, data)["prompt_hidden"])
    expected_critic = 0.5 * ((value - data["value_target"]) ** 2).mean()
    assert out["loss_critic"].item() == pytest.approx(expected_critic.item(), rel=1e-4)
    assert out["loss_entropy"].item() == pytest.approx(-0.01 * out["entropy"].item(), rel=1e-4)


def test_both_losses_train_the_llm(loss):
    data = loss.advantages(rollout(loss, seed=1)).reshape(-1)
    out = loss(data)
    params = [p for p in loss.scorer.parameters() if p.requires_grad]
    for key in ("loss_objective", "loss_critic"):
        grads = torch.autograd.grad(out[key], params, retain_graph=True, allow_unused=True)
        assert sum(g.abs().sum().item() for g in grads if g is not None) > 0, key
