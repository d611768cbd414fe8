"""SAC-GLAM's critic loss against a float64 recomputation from discrete SAC's equations
(Christodoulou 2019): n-step TD(0) targets from the target heads, both distances to them (Huber,
TorchRL's default, and the squared error), the importance weights of prioritized replay."""

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.envs import get_environment
from torchrl_glam.modules import MASKED_LOGIT, SCORES_KEY, make_critic_heads, make_scorer
from torchrl_glam.objectives.sac_glam import SACGLAMLoss

PLAYGROUND = get_environment("playground")  # the environment object the library takes

GAMMA = 0.9


def weighted_batch(filled_replay, size=48):
    """A batch with non-uniform importance weights: priorities from random TD errors first (in a
    copy of the shared replay)."""
    replay = GoalReplay(capacity=5_000, strategy="ratio", environment=PLAYGROUND)
    replay.load_state_dict(filled_replay.state_dict())
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        batch = replay.sample(256)
        replay.update_priority(batch, torch.rand(256, generator=generator) * 3)
    batch = replay.sample(size)
    assert batch["priority_weight"].std() > 0.02 and (batch["steps_to_next_obs"] > 1).any()
    return batch


def heads_input(loss, scored, batch):
    return TensorDict({k: scored[k] for k in loss.head_keys}, batch_size=batch.batch_size)


def critic_loss_float64(loss, batch, distance):
    """sum over both heads of distance(Q_k(s, a), y), y = r + gamma^n (1 - terminal) V(s'),
    V(s') = sum_a' pi(a'|s') (min_k Qtarget_k(s', a') - alpha log pi(a'|s')), reduced as
    sum(w * l) / sum(w); in float64, with gradient into the heads and the LLM."""
    obs = loss.score(batch)
    with torch.no_grad():
        nxt = loss.score(batch, next_obs=True)
        network = loss.sac.qvalue_network
        targets = []
        for params in loss.sac.target_qvalue_network_params.unbind(0):
            with params.to_module(network):
                targets.append(network(heads_input(loss, nxt, batch))["action_value"].double())
        min_target = torch.stack(targets).min(0).values
        mask = nxt["action_mask"]
        log_pi = torch.where(mask, nxt[SCORES_KEY].double(), MASKED_LOGIT).log_softmax(-1)
        alpha = loss.alpha().double()
        value = torch.where(mask, log_pi.exp() * (min_target - alpha * log_pi), 0.0).sum(-1)
        n = batch["steps_to_next_obs"].reshape(-1).double()
        not_terminal = 1.0 - batch["next", "terminated"].reshape(-1).double()
        target = batch["next", "reward"].reshape(-1).double() + GAMMA**n * not_terminal * value
    per_sample = 0
    action = batch["action"].reshape(-1, 1)
    for params in loss.sac.qvalue_network_params.unbind(0):
        with params.to_module(loss.sac.qvalue_network):
            q = (
                loss.sac.qvalue_network(heads_input(loss, obs, batch))["action_value"]
                .double()
                .gather(-1, action)
                .squeeze(-1)
            )
        per_sample = per_sample + distance(q, target)
    w = batch["priority_weight"].double()
    return (w * per_sample).sum() / w.sum()


DISTANCES = {
    "smooth_l1": lambda q, y: F.smooth_l1_loss(q, y, reduction="none"),  # Huber, delta 1
    "l2": lambda q, y: (q - y) ** 2,
}


@pytest.mark.parametrize("critic_loss", ["smooth_l1", "l2"])
def test_critic_loss_and_its_gradient_match_the_equations(filled_replay, critic_loss):
    torch.manual_seed(0)
    scorer = make_scorer(None).module
    loss = SACGLAMLoss(
        scorer,
        make_critic_heads(scorer.hidden_size, width=16),
        num_actions=5,
        gamma=GAMMA,
        alpha_init=0.3,
        environment=PLAYGROUND,
        critic_loss=critic_loss,
    )
    with torch.no_grad():  # targets apart from the heads, and large errors, so Huber's linear part is used
        for p in loss.sac.target_qvalue_network_params.values(True, True):
            p.add_(torch.randn_like(p) * 0.5)
    batch = weighted_batch(filled_replay)
    params = loss.param_groups()["llm"] + loss.param_groups()["heads"][:4]
    expected = critic_loss_float64(loss, batch, DISTANCES[critic_loss])
    expected_grads = torch.autograd.grad(expected, params)
    got = loss(batch)["loss_qvalue"]
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)
    for g, want in zip(torch.autograd.grad(got, params), expected_grads):
        torch.testing.assert_close(g, want.float(), rtol=1e-3, atol=1e-6)
    other = "l2" if critic_loss == "smooth_l1" else "smooth_l1"
    assert critic_loss_float64(loss, batch, DISTANCES[other]).item() != pytest.approx(got.item(), rel=1e-3)


def test_an_unknown_critic_loss_is_refused():
    with pytest.raises(ValueError, match="critic_loss='huber'"):
        SACGLAMLoss(make_scorer(None).module, num_actions=5, environment=PLAYGROUND, critic_loss="huber")


def test_actor_and_temperature_losses_match_the_equations(filled_replay):
    # actor: sum(w * l) / sum(w) of l = sum_a pi(a|s) (alpha log pi(a|s) - min_k Q_k(s, a)), its
    # gradient reaching the LLM through the scores only; temperature: the plain mean of
    # -log(alpha) (sum_a pi log pi + target entropy), and "entropy" the plain mean entropy
    torch.manual_seed(0)
    target_entropy = 0.4
    scorer = make_scorer(None).module
    loss = SACGLAMLoss(
        scorer,
        make_critic_heads(scorer.hidden_size, width=16),
        num_actions=5,
        alpha_init=0.3,
        target_entropy=target_entropy,
        environment=PLAYGROUND,
    )
    with torch.no_grad():  # Q-values that differ between states, as after training
        for p in loss.sac.qvalue_network_params.values(True, True):
            p.add_(torch.randn_like(p) * 0.5)
    batch = weighted_batch(filled_replay)
    llm = loss.param_groups()["llm"]
    obs = loss.score(batch)
    mask = obs["action_mask"]
    log_pi = torch.where(mask, obs[SCORES_KEY].double(), MASKED_LOGIT).log_softmax(-1)
    pi_log_pi = torch.where(mask, log_pi.exp() * log_pi, 0.0).sum(-1)
    with torch.no_grad():
        min_q = loss.q_values(heads_input(loss, obs, batch)).min(0).values.double()
    alpha = loss.alpha().double()
    per_sample = torch.where(mask, log_pi.exp() * (alpha * log_pi - min_q), 0.0).sum(-1)
    w = batch["priority_weight"].double()
    actor = (w * per_sample).sum() / w.sum()
    expected_grads = torch.autograd.grad(actor, llm)
    out = loss(batch)
    assert out["loss_actor"].item() == pytest.approx(actor.item(), rel=1e-5)
    for got, want in zip(torch.autograd.grad(out["loss_actor"], llm), expected_grads):
        torch.testing.assert_close(got, want.float(), rtol=1e-3, atol=1e-6)
    temperature = (-loss.sac.log_alpha.double() * (pi_log_pi.detach() + target_entropy)).mean()
    assert out["loss_alpha"].item() == pytest.approx(temperature.item(), rel=1e-5)
    assert out["entropy"].item() == pytest.approx(-pi_log_pi.mean().item(), rel=1e-5)
    unweighted_actor = per_sample.mean()
    # the weights matter here: beyond the precision the loss is matched at (the batch, drawn by
    # priority, moves with the session's float sums; its weighted and plain means differ by 6e-4 in some)
    assert unweighted_actor.item() != pytest.approx(actor.item(), rel=1e-5)
