"""SACGLAMLoss as a TorchRL LossModule: declared keys, set_keys, warm-up as state, named
parameter groups, Q-values and alpha through public API."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives import LossModule

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.modules import make_critic_heads, make_scorer
from torchrl_glam.objectives.sac_glam import SUCCESS_LOGIT_KEY, SACGLAMLoss

PLAYGROUND = get_environment("playground")  # the environment object the library takes


@pytest.fixture(scope="module")
def batch():
    """One-step transitions of random play (compact state only)."""
    env = PlaygroundTextEnv(num_envs=16, goals="simplified", text=False, seed=0)
    td = env.reset()
    td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=torch.Generator().manual_seed(0)).squeeze(
        -1
    )
    return env.step(td)


def make_loss(critic_dueling=False, **kwargs):
    torch.manual_seed(0)
    scorer = make_scorer(None).module
    heads = make_critic_heads(scorer.hidden_size, width=16, dueling=critic_dueling)
    if kwargs.get("success_loss_coef"):
        kwargs["success_network"] = make_critic_heads(scorer.hidden_size, width=16, out_key=SUCCESS_LOGIT_KEY)
    return SACGLAMLoss(scorer, heads, num_actions=5, environment=PLAYGROUND, **kwargs)


def test_declared_keys_and_set_keys(batch):
    loss = make_loss()
    assert isinstance(loss, LossModule)
    assert {"goal_id", "objects", "action", ("next", "reward"), ("next", "held")} <= set(loss.in_keys)
    assert {"loss_qvalue", "loss_actor", "loss_alpha", "td_error"} <= set(loss.out_keys)
    out = loss(batch.clone())
    assert set(loss.out_keys) == set(out.keys())
    renamed = batch.clone()
    renamed["next", "r"] = renamed["next"].pop("reward")
    loss.set_keys(reward="r")
    assert ("next", "r") in loss.in_keys
    assert torch.equal(loss(renamed)["td_error"], out["td_error"])
    with pytest.raises(ValueError, match="not an accepted tensordict key"):
        loss.set_keys(rewardz="r")


def test_named_parameter_groups_cover_the_trainable_parameters():
    loss = make_loss()
    groups = loss.param_groups()
    assert list(groups) == ["llm", "heads", "alpha"]
    assert groups["alpha"] == [loss.sac.log_alpha]
    ids = [id(p) for group in groups.values() for p in group]
    assert len(ids) == len(set(ids))
    assert {id(p) for p in loss.parameters() if p.requires_grad} <= set(ids)


def test_warm_up_is_state_and_keeps_the_critic_off_the_llm(batch):
    loss = make_loss(critic_backprop=True)
    llm = loss.param_groups()["llm"]

    def critic_grad_into_llm():
        grads = torch.autograd.grad(loss(batch.clone())["loss_qvalue"], llm, allow_unused=True)
        return sum(g.abs().sum().item() for g in grads if g is not None)

    assert critic_grad_into_llm() > 0
    with loss.warming_up():
        assert loss.warmup and critic_grad_into_llm() == 0
    assert not loss.warmup and critic_grad_into_llm() > 0


def test_q_values_and_alpha_through_public_api(batch):
    loss = make_loss(alpha_init=0.05)
    assert loss.alpha().item() == pytest.approx(0.05)
    out = loss(batch.clone())
    obs = loss.score(batch.clone())
    q = loss.q_values(TensorDict({loss.hidden_key: obs[loss.hidden_key].detach()}, batch_size=[16]))
    assert q.shape == (2, 16, 5)
    chosen = q.min(0)[0].gather(-1, batch["action"].unsqueeze(-1)).mean()
    assert out["q_value"].item() == pytest.approx(chosen.item(), rel=1e-5)
    # the analyses' shortcut: the smaller head's values of the states, straight from the batch
    states = loss.min_q_values(batch.clone())
    assert not states.requires_grad and torch.allclose(states, q.min(0)[0], atol=1e-6)


def test_a_target_llm_gives_the_targets_and_follows_the_llm_by_polyak_averaging(batch):
    loss, paper = make_loss(target_llm=True), make_loss()
    assert set(loss.target_llm.keys(True, True)) == set(loss.llm_weights().keys(True, True))
    assert not list(loss.target_llm.parameters())  # buffers: checkpointed, never optimised
    assert any(key.startswith("target_llm.") for key in loss.state_dict())
    # a fresh copy is the LLM: the same losses as without one
    out = loss(batch.clone())
    assert torch.allclose(out["td_error"], paper(batch.clone())["td_error"])
    # the targets, and only they, read the target LLM
    with torch.no_grad():
        loss.target_llm.apply_(lambda weight: weight.add_(0.05 * torch.randn_like(weight)))
    moved = loss(batch.clone())
    assert not torch.allclose(moved["td_error"], out["td_error"])
    assert moved["q_value"].item() == out["q_value"].item() and moved["entropy"].item() == out["entropy"].item()
    # an update moves it a fraction tau of the way to the LLM
    old = loss.target_llm.clone()
    loss.make_target_updater(tau=0.25).step()
    for key, weight in loss.llm_weights().items(True, True):
        assert torch.allclose(loss.target_llm[key], old[key] + 0.25 * (weight.detach() - old[key]))


def test_success_head_labels_only_the_chosen_actions_own_success(filled_replay):
    # the head's label is "this action ended the episode with a success": a success reached later
    # in an n-step window (steps_to_next_obs > 1) is not the chosen action's
    loss = make_loss(success_loss_coef=2.0)
    batch = filled_replay.sample(32)
    td = TensorDict(
        {
            loss.hidden_key: loss.score(batch)[loss.hidden_key].detach(),
            "action": batch["action"],
            "next": {"terminated": torch.ones(32, 1, dtype=torch.bool), "reward": torch.ones(32, 1)},
            "steps_to_next_obs": torch.full((32, 1), 3),
        },
        batch_size=[32],
    )
    last = list(loss.success_head.parameters())
    with torch.no_grad():  # a constant logit b: the loss is 2 * 0.5 * softplus(-b if success else b)
        for p in last[:-1]:
            p.zero_()
        last[-1].fill_(1.5)
    softplus = torch.nn.functional.softplus
    assert loss.success_loss(td).item() == pytest.approx(softplus(torch.tensor(1.5)).item(), rel=1e-5)
    td["steps_to_next_obs"][:] = 1
    assert loss.success_loss(td).item() == pytest.approx(softplus(torch.tensor(-1.5)).item(), rel=1e-5)
    td["steps_to_next_obs"][:16] = 3  # half each: successes and failures weigh half each
    both = 2 * 0.5 * (softplus(torch.tensor(1.5)) + softplus(torch.tensor(-1.5)))
    assert loss.success_loss(td).item() == pytest.approx(both.item(), rel=1e-5)
    # an episode that terminates without a reward (a game lost, BabyAI's wrong object put down)
    # is a failure, not a success
    td["steps_to_next_obs"][:] = 1
    td["next", "reward"][:16] = 0.0
    assert loss.success_loss(td).item() == pytest.approx(both.item(), rel=1e-5)


def test_success_head_trains_the_llm_like_the_critic_and_is_off_by_default(filled_replay):
    batch = filled_replay.sample(32)
    plain = make_loss()
    assert plain.success_head is None and plain(batch.clone())["loss_success"].item() == 0.0
    loss = make_loss(success_loss_coef=1.0)
    assert set(loss.out_keys) == set(loss(batch.clone()).keys())
    head = list(loss.success_head.parameters())
    assert {id(p) for p in head} <= {id(p) for p in loss.param_groups()["heads"]}
    llm = loss.param_groups()["llm"]

    def grad_norms():
        grads = torch.autograd.grad(loss(batch.clone())["loss_success"], llm + head, allow_unused=True)
        return [
            sum(g.abs().sum().item() for g in part if g is not None) for part in (grads[: len(llm)], grads[len(llm) :])
        ]

    into_llm, into_head = grad_norms()
    assert into_llm > 0 and into_head > 0
    with loss.warming_up():  # the warm-up keeps it off the LLM, as it does the critic's loss
        into_llm, into_head = grad_norms()
        assert into_llm == 0 and into_head > 0


def test_a_dueling_critic_trains_the_llm_through_both_hidden_states(batch):
    loss = make_loss(critic_dueling=True)
    assert loss.hidden_keys == ["action_hidden", "prompt_hidden"]
    out = loss(batch.clone())
    assert set(loss.out_keys) == set(out.keys())
    obs = loss.score(batch.clone())
    q = loss.q_values(TensorDict({k: obs[k].detach() for k in loss.head_keys}, batch_size=[16]))
    chosen = q.min(0)[0].gather(-1, batch["action"].unsqueeze(-1)).mean()
    assert out["q_value"].item() == pytest.approx(chosen.item(), rel=1e-5)
    llm = loss.param_groups()["llm"]
    grads = torch.autograd.grad(loss(batch.clone())["loss_qvalue"], llm, allow_unused=True)
    assert sum(g.abs().sum().item() for g in grads if g is not None) > 0
    with loss.warming_up():  # the warm-up detaches both hidden states
        grads = torch.autograd.grad(loss(batch.clone())["loss_qvalue"], llm, allow_unused=True)
        assert sum(g.abs().sum().item() for g in grads if g is not None) == 0


def test_a_loss_built_for_another_number_of_candidates_is_refused(batch):
    """The heads output one value per candidate: a mismatch with the environment's candidates must
    not train on the wrong ones (the README's snippet once passed 5 for an environment with 8)."""
    scorer = make_scorer(None).module
    loss = SACGLAMLoss(scorer, make_critic_heads(scorer.hidden_size, width=16), num_actions=8, environment=PLAYGROUND)
    with pytest.raises(ValueError, match=r"5 candidate actions.*num_actions=8.*num_actions=5"):
        loss(batch.clone())
