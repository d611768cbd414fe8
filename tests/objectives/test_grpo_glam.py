"""GRPO-GLAM's loss (issue 87) against an independent recomputation in float64: the episode-level
and step-level (GiGPO) group-relative advantages, the clipped objective, the entropy bonus, the KL
to the initial policy, and their gradients into the LLM."""

import statistics

import pytest
import torch
from torchrl.modules import MaskedCategorical
from torchrl.objectives import LossModule

from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs import get_environment
from torchrl_glam.modules import MASKED_LOGIT, make_scorer
from torchrl_glam.objectives.common import score_states
from torchrl_glam.objectives.grpo_glam import REFERENCE_SCORES_KEY, GRPOGLAMLoss
from torchrl_glam.training.factories import make_env

PLAYGROUND = get_environment("playground")  # the environment object the library takes

G, GAMMA, OMEGA, EPS = 3, 0.9, 0.7, 1e-6


def make_loss(**kwargs) -> GRPOGLAMLoss:
    torch.manual_seed(0)
    options = dict(group_size=G, gamma=GAMMA, step_weight=OMEGA, eps=EPS, environment=PLAYGROUND)
    return GRPOGLAMLoss(make_scorer(None).module, **{**options, **kwargs})


def group_rollout(loss, groups=2, steps=8, seed=0):
    """Groups of G episodes from one start [B, T], one episode per row ("mask": its steps), played
    by a uniformly random behaviour policy (states that differ and recur), with random rewards so
    that every advantage term is exercised."""
    env = make_env(make_config("smoke"), num_envs=groups * G, seed=seed)
    td = loss.environment.reset_in_groups(env, G)
    generator = torch.Generator().manual_seed(seed)
    out, keep = [], [*loss.environment.state_keys, "action", "sample_log_prob"]
    for _ in range(steps):
        legal = td["action_mask"].float()
        td["action"] = torch.multinomial(legal, 1, generator=generator).squeeze(-1)
        td["sample_log_prob"] = -legal.sum(-1).log()
        step, td = env.step_and_maybe_reset(td)  # the steps after a row's first end are masked out
        out.append(step.select(*keep))
        out[-1]["next"] = step["next"].select("reward", "done", "terminated", *loss.environment.step_keys)
    rollout = torch.stack(out, dim=1)
    done = rollout["next", "done"].squeeze(-1)
    rollout["mask"] = (done.long().cumsum(1) - done.long()) == 0  # up to each row's first end
    rollout["next", "reward"] = (torch.rand(rollout["next", "reward"].shape, generator=generator) < 0.3).float()
    return rollout


def expected_advantages(rollout, state_keys, step_level: bool) -> torch.Tensor:
    """Plain Python, float64: GRPO's and GiGPO's definitions, step by step."""
    B, T = rollout.shape
    mask = rollout["mask"].tolist()
    reward = rollout["next", "reward"].reshape(B, T).double().tolist()
    state = [
        [tuple(v for k in state_keys for v in rollout[k][b, t].reshape(-1).tolist()) for t in range(T)]
        for b in range(B)
    ]
    out = [[0.0] * T for _ in range(B)]
    for first in range(0, B, G):
        rows = range(first, first + G)
        returns = [sum(r for r, m in zip(reward[b], mask[b]) if m) for b in rows]
        mean, std = statistics.fmean(returns), statistics.stdev(returns)
        rtg, anchors = {}, {}
        for b in rows:
            running = 0.0
            for t in reversed(range(T)):
                if mask[b][t]:
                    running = reward[b][t] + GAMMA * running
                    rtg[b, t] = running
                    anchors.setdefault(state[b][t], []).append((b, t))
        for b in rows:
            for t in range(T):
                if mask[b][t]:
                    out[b][t] = (returns[b - first] - mean) / (std + EPS)
        if step_level:
            for members in anchors.values():
                if len(members) < 2:
                    continue
                values = [rtg[m] for m in members]
                mu, sd = statistics.fmean(values), statistics.stdev(values)
                for m in members:
                    out[m[0]][m[1]] += OMEGA * (rtg[m] - mu) / (sd + EPS)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("step_level", [False, True], ids=["episode_level", "step_level"])
def test_advantages_match_the_definitions(step_level):
    loss = make_loss(step_level=step_level)
    rollout = group_rollout(loss)
    got = loss.advantages(rollout)["advantage"].squeeze(-1).double()
    expected = expected_advantages(rollout, loss.environment.state_keys, step_level)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    assert expected.abs().sum() > 0
    if step_level:  # step groups of one step and of several occur
        ids, mask = loss.state_ids(rollout)[:G], rollout["mask"][:G]
        counts = ids[mask].unique(return_counts=True)[1]
        assert (counts == 1).any() and (counts > 1).any() and ids[:, 0].unique().numel() == 1


def objective(loss, data, clip_epsilon, entropy_coeff, kl_coeff):
    """-mean(min(r A, clip(r, 1-eps, 1+eps) A)) - c_H mean H + beta mean KL(pi || pi_ref), float64,
    from the rescored candidates (with gradient into the LLM)."""
    scored = score_states(loss.scorer, data, environment=PLAYGROUND)
    mask = scored["action_mask"]
    new = MaskedCategorical(logits=scored["action_scores"].double(), mask=mask, neg_inf=MASKED_LOGIT)
    log_p = new.logits.log_softmax(-1)
    ratio = (new.log_prob(data["action"]) - data["sample_log_prob"].double()).exp()
    advantage = data["advantage"].squeeze(-1).double()
    surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - clip_epsilon, 1 + clip_epsilon) * advantage)
    entropy = -torch.where(mask, log_p.exp() * log_p, 0.0).sum(-1)
    total = -surrogate.mean() - entropy_coeff * entropy.mean()
    if kl_coeff:
        ref = MaskedCategorical(logits=data[REFERENCE_SCORES_KEY].double(), mask=mask, neg_inf=MASKED_LOGIT)
        kl = torch.where(mask, log_p.exp() * (log_p - ref.logits.log_softmax(-1)), 0.0).sum(-1)
        total = total + kl_coeff * kl.mean()
    return total


@pytest.mark.parametrize("kl_coeff", [0.0, 0.3], ids=["no_kl", "kl"])
def test_the_loss_and_its_gradients_match_the_objective(kl_coeff):
    clip_epsilon, entropy_coeff = 0.2, 0.05
    loss = make_loss(step_level=True, kl_coeff=kl_coeff, clip_epsilon=clip_epsilon, entropy_coeff=entropy_coeff)
    data = loss.advantages(group_rollout(loss, seed=1))
    data = data[data["mask"]]
    generator = torch.Generator().manual_seed(2)  # a behaviour policy off the current one: some ratios clip
    data["sample_log_prob"] = data["sample_log_prob"] + 0.4 * torch.randn(
        data["sample_log_prob"].shape, generator=generator
    )
    if kl_coeff:  # an initial policy other than the current one, as after some updates
        data[REFERENCE_SCORES_KEY] = data[REFERENCE_SCORES_KEY] + torch.randn(
            data[REFERENCE_SCORES_KEY].shape, generator=generator
        )
    params = loss.parameters_to_train()
    out = loss(data)
    total = out["loss_objective"] + out["loss_entropy"] + out["loss_kl"]
    expected = objective(loss, data, clip_epsilon, entropy_coeff, kl_coeff)
    assert total.item() == pytest.approx(expected.item(), rel=1e-6, abs=1e-7)
    assert 0 < out["clip_fraction"].item() < 1 and (out["kl_to_initial"].item() > 1e-3) == bool(kl_coeff)
    got_grads = torch.autograd.grad(total, params, allow_unused=True)
    expected_grads = torch.autograd.grad(expected, params, allow_unused=True)
    for got, want in zip(got_grads, expected_grads, strict=True):
        if want is None:
            assert got is None or not got.any()
            continue
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-6 * float(want.abs().max() + 1))


def test_grpo_glam_loss_is_a_torchrl_loss_module_with_declared_keys():
    loss = make_loss(kl_coeff=0.1)
    assert isinstance(loss, LossModule)
    assert set(loss.in_keys) >= {"action", "sample_log_prob", "advantage", REFERENCE_SCORES_KEY}
    loss.set_keys(advantage="group_advantage")
    assert loss.ppo.tensor_keys.advantage == "group_advantage" and "group_advantage" in loss.in_keys
    with pytest.raises(ValueError, match="group_size=1: a group needs at least 2 episodes"):
        make_loss(group_size=1)
