"""PPO-GLAM on ClipPPOLoss / KLPENPPOLoss and GAE: hand-computed advantages and losses, the
first-epoch ratio, the KL penalty against the behaviour policy, the centred clip (App. G)."""

import math

import pytest
import torch
from torchrl.modules import MaskedCategorical
from torchrl.objectives import LossModule

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs import get_environment
from torchrl_glam.modules import MASKED_LOGIT, PROMPT_HIDDEN_KEY, make_scorer, make_value_head
from torchrl_glam.objectives.common import score_states
from torchrl_glam.objectives.ppo_glam import BEHAVIOUR_SCORES_KEY, FIRST_EPOCH_LOG_PROB_KEY, VALUE_KEY, PPOGLAMLoss
from torchrl_glam.training.factories import act, make_env

HIDDEN = 64  # the offline tiny T5's d_model: its value heads' input

PLAYGROUND = get_environment("playground")  # the environment object the library takes

GAMMA, LMBDA = 0.9, 0.5


def playground_loss(scorer, **kwargs) -> PPOGLAMLoss:
    """A PPO-GLAM loss over ``scorer`` on Playground-Text, with a value head of 32 units."""
    return PPOGLAMLoss(scorer, make_value_head(HIDDEN, 32), environment=PLAYGROUND, **kwargs)


@pytest.fixture(scope="module")
def loss():
    torch.manual_seed(0)
    return playground_loss(make_scorer(None).module, gamma=GAMMA, gae_lambda=LMBDA)


def rollout(loss, num_envs=4, steps=6, seed=0):
    """A real rollout [B, T] of the simplified environment with the policy's log-probs."""
    env = make_env(make_config("smoke"), num_envs=num_envs, seed=seed)
    td = env.reset()
    torch.manual_seed(seed)
    steps_out = []
    for _ in range(steps):
        act(loss, td, with_log_prob=True)
        step, td = env.step_and_maybe_reset(td)
        steps_out.append(
            step.select(
                "goal_id",
                "objects",
                "agent_on",
                "held",
                "grown",
                "action",
                "sample_log_prob",
                BEHAVIOUR_SCORES_KEY,
                ("next", "agent_on"),
                ("next", "held"),
                ("next", "grown"),
                ("next", "reward"),
                ("next", "done"),
                ("next", "terminated"),
            )
        )
    return torch.stack(steps_out, dim=1)


@pytest.mark.parametrize(
    "ending, bootstrap_time_limit",
    [("terminal", True), ("time_limit", True), ("time_limit", False)],
)
def test_gae_matches_a_hand_computation(ending, bootstrap_time_limit):
    loss = playground_loss(
        make_scorer(None).module, gamma=GAMMA, gae_lambda=LMBDA, bootstrap_time_limit=bootstrap_time_limit
    )
    data = rollout(loss, num_envs=1, steps=3)
    data["next", "reward"] = torch.tensor([[[0.0], [0.0], [1.0]]])
    data["next", "done"] = torch.tensor([[[False], [False], [True]]])
    data["next", "terminated"] = data["next", "done"] & (ending == "terminal")  # else done by the time limit
    c = 0.25  # a constant value function: last layer zero, bias c
    last = [m for m in loss.value.module.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(c)
    out = loss.advantages(data)
    d0 = d1 = GAMMA * c - c
    # a terminal, or a time limit read as one (GLAM's mask = 1 - done): no bootstrap
    bootstrap = ending == "time_limit" and bootstrap_time_limit
    d2 = 1.0 + (GAMMA * c if bootstrap else 0.0) - c
    a2 = d2
    a1 = d1 + GAMMA * LMBDA * a2
    a0 = d0 + GAMMA * LMBDA * a1
    assert out["advantage"].reshape(-1).tolist() == pytest.approx([a0, a1, a2], abs=1e-6)
    assert out["value_target"].reshape(-1).tolist() == pytest.approx([a0 + c, a1 + c, a2 + c], abs=1e-6)
    assert torch.equal(out["next", "terminated"], data["next", "terminated"])  # the rollout's flags are kept


def test_first_epoch_ratio_is_one_and_losses_match_their_formulas(loss):
    data = loss.advantages(rollout(loss)).reshape(-1)
    out = loss(data)
    assert out["ratio"].item() == pytest.approx(1.0, abs=1e-4)  # the policy that collected = the one scored
    assert out["clip_fraction"].item() == 0.0
    # ratio 1: the clipped surrogate is -mean(advantage)
    assert out["loss_objective"].item() == pytest.approx(-data["advantage"].mean().item(), abs=1e-4)
    with torch.no_grad():  # the value of the rescored prompts
        value = loss.value.module(score_states(loss.scorer, data, environment=PLAYGROUND)["prompt_hidden"])
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


def policy(scores, mask):
    return MaskedCategorical(logits=scores, mask=mask, neg_inf=MASKED_LOGIT)


def kl_data(loss):
    """A minibatch whose behaviour policy differs from the current one, as after a few epochs (or
    with HER), with random advantages."""
    data = loss.advantages(rollout(loss)).reshape(-1)
    data[BEHAVIOUR_SCORES_KEY] = data[BEHAVIOUR_SCORES_KEY] + torch.randn(data[BEHAVIOUR_SCORES_KEY].shape)
    mask = score_states(loss.scorer, data, environment=PLAYGROUND)["action_mask"]
    data["sample_log_prob"] = policy(data[BEHAVIOUR_SCORES_KEY], mask).log_prob(data["action"])
    data["advantage"] = torch.randn(data["advantage"].shape)
    return data


def kl_objective(loss, data, beta, grad=False):
    """The KL-penalised objective -mean(r A - beta KL(pi_old || pi)) recomputed in float64 from the
    rescored candidates (with gradient into the scorer when ``grad``), and the mean KL and ratio."""
    with torch.set_grad_enabled(grad):
        scored = score_states(loss.scorer, data, environment=PLAYGROUND)
        mask = scored["action_mask"]
        old = policy(data[BEHAVIOUR_SCORES_KEY].double(), mask)
        new = policy(scored["action_scores"].double(), mask)
        ratio = (new.log_prob(data["action"]) - data["sample_log_prob"].double()).exp()
        log_p_old, log_p_new = old.logits.log_softmax(-1), new.logits.log_softmax(-1)
        kl = torch.where(mask, old.probs * (log_p_old - log_p_new), 0.0).sum(-1)
        objective = -(ratio * data["advantage"].squeeze(-1).double() - beta * kl).mean()
    return objective, kl.mean(), ratio.mean()


def test_kl_loss_penalises_the_kl_from_the_behaviour_policy():
    torch.manual_seed(0)
    beta = 0.7
    loss = playground_loss(make_scorer(None).module, gamma=GAMMA, gae_lambda=LMBDA, ppo_loss="kl", kl_coeff=beta)
    data = kl_data(loss)
    out = loss(data)
    expected, kl, ratio = kl_objective(loss, data, beta)
    assert kl > 1e-2  # a real penalty
    assert out["loss_objective"].item() == pytest.approx(expected.item(), rel=1e-4)
    assert out["kl"].item() == pytest.approx(kl.item(), rel=1e-4)
    assert out["ratio"].item() == pytest.approx(ratio.item(), rel=1e-5)
    assert out["kl_coeff"].item() == pytest.approx(beta)  # kl_target=None: a constant beta, as in eq. 5
    adaptive = playground_loss(loss.scorer, ppo_loss="kl", kl_coeff=beta, kl_target=1e-4)
    adaptive(data)
    assert adaptive.ppo.beta.item() == pytest.approx(2 * beta)  # TorchRL's rule: doubles above 1.5 x the target


@pytest.mark.parametrize("kl_target", [1e-4, 10.0], ids=["beta_doubles", "beta_halves"])
def test_adaptive_kl_gradient_is_the_gradient_of_the_reported_loss(kl_target):
    # TorchRL's KLPENPPOLoss adapts beta in place after building the loss: the backward pass must
    # still use the beta the reported loss was computed with, and the next forward the adapted one
    torch.manual_seed(0)
    beta = 0.7
    loss = playground_loss(make_scorer(None).module, ppo_loss="kl", kl_coeff=beta, kl_target=kl_target)
    data = kl_data(loss)
    params = [p for p in loss.scorer.parameters() if p.requires_grad]
    expected, _, _ = kl_objective(loss, data, beta, grad=True)
    expected_grads = torch.autograd.grad(expected, params, allow_unused=True)
    out = loss(data)
    adapted = 2 * beta if kl_target < 1 else beta / 2
    assert out["kl_coeff"].item() == pytest.approx(adapted) and loss.ppo.beta.item() == pytest.approx(adapted)
    assert out["loss_objective"].item() == pytest.approx(expected.item(), rel=1e-4)
    for p in params:
        p.grad = None
    out["loss_objective"].backward()  # as the update does
    compared = [(p.grad, g) for p, g in zip(params, expected_grads) if g is not None]
    assert len(compared) > 10
    for got, want in compared:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)
    # a checkpoint holds the adapted beta, and a resumed loss starts from it
    resumed = playground_loss(loss.scorer, ppo_loss="kl", kl_target=kl_target)
    resumed.load_trainable_state_dict(loss.trainable_state_dict())
    assert resumed.ppo.beta.item() == pytest.approx(adapted)
    # the next forward uses the adapted beta
    again, _, _ = kl_objective(loss, data, adapted)
    assert loss(data)["loss_objective"].item() == pytest.approx(again.item(), rel=1e-4)


def test_centred_clip_clips_around_the_first_epoch_ratio():
    torch.manual_seed(0)
    scorer = make_scorer(None).module
    eps = 0.2
    centred = playground_loss(scorer, clip_epsilon=eps, centred=True)
    plain = playground_loss(scorer, clip_epsilon=eps)
    data = centred.advantages(rollout(centred)).reshape(-1)
    n = len(data)
    log_prob = data[FIRST_EPOCH_LOG_PROB_KEY].clone()  # the current policy: nothing trained yet
    d = torch.linspace(-0.5, 0.5, n)[torch.randperm(n)]  # log(r / c): inside and outside the range
    c = torch.empty(n).uniform_(math.log(0.3), math.log(3.0)).exp()  # first-epoch ratios (relabeled)
    data[FIRST_EPOCH_LOG_PROB_KEY] = log_prob - d
    data["sample_log_prob"] = log_prob - d - c.log()
    advantage = torch.randn(n)
    data["advantage"] = advantage.unsqueeze(-1)
    r = c * d.exp()  # pi_theta(a|s,g') / pi_old(a|s,g)

    def surrogate(low, high):
        return -torch.minimum(r * advantage, torch.minimum(torch.maximum(r, low), high) * advantage).mean().item()

    out_centred, out_plain = centred(data), plain(data)
    one = torch.ones(n)
    assert out_centred["loss_objective"].item() == pytest.approx(surrogate(c * (1 - eps), c * (1 + eps)), rel=1e-4)
    assert out_plain["loss_objective"].item() == pytest.approx(surrogate(one * (1 - eps), one * (1 + eps)), rel=1e-4)
    assert out_centred["loss_objective"].item() != pytest.approx(out_plain["loss_objective"].item(), rel=1e-3)
    outside = ((d < math.log(1 - eps)) | (d > math.log(1 + eps))).float().mean()
    assert out_centred["clip_fraction"].item() == pytest.approx(outside.item(), abs=1e-6)
    assert out_centred["ratio"].item() == pytest.approx(r.mean().item(), rel=1e-4)
    with pytest.raises(ValueError, match="centred=True.*needs ppo_loss='clip'"):
        PPOGLAMLoss(scorer, environment=PLAYGROUND, centred=True, ppo_loss="kl")


def test_loss_arguments_are_named_as_the_config_fields():
    scorer = make_scorer(None).module
    loss = playground_loss(scorer, gae_lambda=0.5, ppo_loss="kl")
    assert loss.ppo.value_estimator.lmbda == 0.5 and loss.loss_kind == "kl"
    with pytest.raises(ValueError, match="ppo_loss='ppo'"):
        PPOGLAMLoss(scorer, environment=PLAYGROUND, ppo_loss="ppo")


@pytest.mark.parametrize("kind", ["clip", "kl"])
def test_ppo_loss_is_a_torchrl_loss_module_with_declared_keys(kind):
    torch.manual_seed(0)
    loss = playground_loss(make_scorer(None).module, gamma=GAMMA, gae_lambda=LMBDA, ppo_loss=kind)
    assert isinstance(loss, LossModule)
    data = rollout(loss, num_envs=2, steps=4)
    advantaged = loss.advantages(data).reshape(-1)
    assert set(loss.in_keys) <= set(advantaged.keys(True))
    assert {"goal_id", "action", "sample_log_prob", "advantage", "value_target"} <= set(loss.in_keys)
    assert (BEHAVIOUR_SCORES_KEY in loss.in_keys) == (kind == "kl")
    out = loss(advantaged)
    assert set(out.keys()) == set(loss.out_keys)
    # named parameter groups: the LLM and the value head, together every trainable parameter once
    groups = loss.param_groups()
    assert set(groups) == {"llm", "heads"}
    assert [id(p) for p in groups["llm"] + groups["heads"]] == [id(p) for p in loss.parameters_to_train()]
    assert {id(p) for p in groups["heads"]} == {id(p) for p in loss.value.parameters()}
    # set_keys: the same rollout under other names gives the same advantages and losses
    renamed = playground_loss(loss.scorer, gamma=GAMMA, gae_lambda=LMBDA, ppo_loss=kind)
    renamed.value.load_state_dict(loss.value.state_dict())
    renamed.set_keys(
        reward="r",
        done="d",
        terminated="t",
        action="a",
        sample_log_prob="lp",
        advantage="adv",
        value_target="vt",
        behaviour_scores="bs",
    )
    assert {"a", "lp", "adv", "vt"} <= set(renamed.in_keys) and "action" not in renamed.in_keys
    other = data.clone()
    for old, new in (
        ("action", "a"),
        ("sample_log_prob", "lp"),
        (BEHAVIOUR_SCORES_KEY, "bs"),
        (("next", "reward"), ("next", "r")),
        (("next", "done"), ("next", "d")),
        (("next", "terminated"), ("next", "t")),
    ):
        other.rename_key_(old, new)
    other_adv = renamed.advantages(other).reshape(-1)
    torch.testing.assert_close(other_adv["adv"], advantaged["advantage"])
    torch.testing.assert_close(other_adv["vt"], advantaged["value_target"])
    other_out = renamed(other_adv)
    for key in ("loss_objective", "loss_critic", "loss_entropy"):
        torch.testing.assert_close(other_out[key], out[key])
    with pytest.raises(ValueError, match="not an accepted tensordict key"):
        renamed.set_keys(rewardz="r")


def shifted_policy_data(loss, seed=0):
    """A minibatch scored by a policy other than the collecting one: log(r) spread over
    [-0.5, 0.5] (inside and outside the clipping range), random advantages."""
    generator = torch.Generator().manual_seed(seed)
    data = loss.advantages(rollout(loss)).reshape(-1)
    n = len(data)
    data["sample_log_prob"] = (
        data[FIRST_EPOCH_LOG_PROB_KEY] - torch.linspace(-0.5, 0.5, n)[torch.randperm(n, generator=generator)]
    )
    data["advantage"] = torch.randn(n, 1, generator=generator) * 2 + 0.5
    return data


def test_normalize_advantage_standardises_the_advantages_of_the_minibatch():
    torch.manual_seed(0)
    eps = 0.2
    loss = playground_loss(make_scorer(None).module, normalize_advantage=True)
    data = shifted_policy_data(loss)
    a = data["advantage"].squeeze(-1).double()
    normalised = (a - a.mean()) / a.std()
    r = (data[FIRST_EPOCH_LOG_PROB_KEY] - data["sample_log_prob"]).double().exp()
    surrogate = -torch.minimum(r * normalised, r.clamp(1 - eps, 1 + eps) * normalised).mean()
    assert loss(data)["loss_objective"].item() == pytest.approx(surrogate.item(), rel=1e-4)
    plain = playground_loss(loss.scorer)
    assert plain(data)["loss_objective"].item() != pytest.approx(surrogate.item(), rel=1e-2)
    with pytest.raises(ValueError, match="normalize_advantage=False"):
        PPOGLAMLoss(loss.scorer, environment=PLAYGROUND, centred=True, normalize_advantage=True)


def test_clip_value_clips_the_value_around_the_collecting_policys_and_its_gradient_follows():
    torch.manual_seed(0)
    clip = 0.05
    loss = playground_loss(make_scorer(None).module, clip_value=clip)
    data = shifted_policy_data(loss)
    assert VALUE_KEY in loss.in_keys and "value_clip_fraction" in loss.out_keys
    n = len(data)
    data[VALUE_KEY] = data[VALUE_KEY] + torch.linspace(-0.15, 0.15, n).unsqueeze(-1)  # V_old: inside and outside
    params = list(loss.value.parameters())
    hidden = score_states(loss.scorer, data, environment=PLAYGROUND)[PROMPT_HIDDEN_KEY].detach()
    value = loss.value.module(hidden).squeeze(-1).double()
    old, target = data[VALUE_KEY].squeeze(-1).double(), data["value_target"].squeeze(-1).double()
    clipped = old + (value - old).clamp(-clip, clip)
    expected = 0.5 * torch.maximum((value - target) ** 2, (clipped - target) ** 2).mean()  # critic_coeff 0.5
    expected_grads = torch.autograd.grad(expected, params)
    out = loss(data)
    assert out["loss_critic"].item() == pytest.approx(expected.item(), rel=1e-5)
    for got, want in zip(torch.autograd.grad(out["loss_critic"], params), expected_grads):
        torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-7)
    outside = ((value - old).abs() > clip).double().mean()
    assert 0 < outside < 1 and out["value_clip_fraction"].item() == pytest.approx(outside.item(), abs=1e-6)
    unclipped = 0.5 * ((value - target) ** 2).mean()
    assert unclipped.item() != pytest.approx(expected.item(), rel=1e-3)  # the clip changes the loss here
