"""The package's pieces in a stock TorchRL script, through public names only: a ``Collector``
with the library's policy module on the environment, a ``ReplayBuffer`` that renders text at
sampling time, the SAC-GLAM loss on a sampled batch, one optimiser step and TorchRL's soft update of
the target heads."""

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import STATE_KEYS, PlaygroundTextEnv, RenderText
from torchrl_glam.modules import GLAMAgent, make_critic_heads, make_scorer
from torchrl_glam.objectives.grpo_glam import GRPOGLAMLoss
from torchrl_glam.objectives.sac_glam import SACGLAMLoss

PLAYGROUND = get_environment("playground")  # the environment object the library takes


# The policy keeps no state between steps, so it needs no "is_init"; TorchRL 0.14 warns that from
# 0.15 a Collector appends an InitTracker to every env that lacks one. Both choices work: False
# (the README's snippet) keeps the data as it is, True is 0.15's default.
@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("auto_register_policy_transforms", [False, True])
def test_collector_replay_buffer_and_sac_glam_loss_in_a_stock_torchrl_script(auto_register_policy_transforms):
    torch.manual_seed(0)
    env = PlaygroundTextEnv(num_envs=4, goals="simplified", text=False, seed=0)
    agent = GLAMAgent(make_scorer(None), environment=PLAYGROUND)
    policy = agent.policy()
    collector = Collector(
        env,
        policy,
        frames_per_batch=32,
        total_frames=64,
        auto_register_policy_transforms=auto_register_policy_transforms,
    )
    replay = ReplayBuffer(storage=LazyTensorStorage(1_000), batch_size=16, transform=RenderText(next_state=True))
    for data in collector:
        assert "prompt" not in data.keys() and "action_scores" not in data.keys()  # integers only
        replay.extend(data.reshape(-1))
    collector.shutdown()
    assert len(replay) == 64
    legal = data["action_mask"].gather(-1, data["action"].unsqueeze(-1))
    assert legal.all()  # the policy never picks a masked candidate

    batch = replay.sample()
    assert set(STATE_KEYS) <= set(batch.keys())  # stored as integers, rendered when sampled
    assert batch["prompt"][0].startswith("Goal: ") and batch["next", "prompt"][0].startswith("Goal: ")
    assert batch["actions"][0][-2:] == ["Grasp", "Release"]

    heads = make_critic_heads(agent.llm.hidden_size, width=16)  # the loss makes the twin heads and targets from it
    loss = SACGLAMLoss(agent, heads, num_actions=env.num_objects + 2)
    target_updater = loss.make_target_updater(tau=0.005)  # TorchRL's SoftUpdate: no "no updater" warning
    targets = loss.sac.target_qvalue_network_params.clone()
    out = loss(batch)
    total = out["loss_qvalue"] + out["loss_actor"] + out["loss_alpha"]
    assert torch.isfinite(total)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    before = {name: p.detach().clone() for name, p in loss.named_parameters() if p.requires_grad}
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    changed = {name for name, p in loss.named_parameters() if p.requires_grad and not torch.equal(p, before[name])}
    assert any(name.startswith("scorer.") for name in changed)  # the LLM learned
    assert any("qvalue_network" in name for name in changed)  # the critic heads learned
    target_updater.step()
    assert (loss.sac.target_qvalue_network_params != targets).any()  # the targets follow the heads

    # greedy play with the same module, through TorchRL's exploration type
    td = env.reset()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        first = policy(td.clone())["action"]
        assert torch.equal(first, policy(td.clone())["action"])


def test_grpo_glam_loss_in_a_stock_torchrl_rollout():
    """docs/site/composing.md's GRPO-GLAM snippet: groups from one start by the environment's
    ``reset_in_groups``, TorchRL's ``env.rollout`` with the library's policy, each row's first
    episode, the loss's group-relative advantages and one optimiser step."""
    torch.manual_seed(0)
    env = PlaygroundTextEnv(num_envs=8, goals="simplified", text=False, seed=0)
    agent = GLAMAgent(make_scorer("offline:tiny-t5-pretrained"), environment=PLAYGROUND)  # succeeds now and then
    loss = GRPOGLAMLoss(agent, group_size=4)  # a LossModule without a critic: TorchRL's ClipPPOLoss inside
    start = agent.environment.reset_in_groups(env, 4)  # 2 groups of 4 episodes, each from one start
    with torch.no_grad():  # acting records the log-probabilities without a graph (a Collector does the same)
        data = env.rollout(
            10, agent.policy(return_log_prob=True), tensordict=start, auto_reset=False, break_when_any_done=False
        )
    done = data["next", "done"].squeeze(-1)
    data["mask"] = done.cumsum(1) - done.long() == 0  # each row's first episode
    data = loss.advantages(data)  # "advantage": (return - group mean) / group std, on every step
    losses = loss(data[data["mask"]])  # "loss_objective", "loss_entropy", "loss_kl", ...
    assert torch.isfinite(losses["loss_objective"]) and losses["ratio"].item() == pytest.approx(1.0, abs=1e-5)
    returns = (data["next", "reward"].squeeze(-1) * data["mask"]).sum(-1).reshape(2, 4)
    advantage = data["advantage"][:, 0, 0].reshape(2, 4)
    for group, values in zip(returns, advantage, strict=True):
        expected = (group - group.mean()) / (group.std() + 1e-6)
        assert torch.allclose(values, torch.nan_to_num(expected, nan=0.0), atol=1e-5)
    optimizer = torch.optim.Adam(loss.parameters_to_train(), lr=1e-3)
    before = [p.detach().clone() for p in loss.parameters_to_train()]
    optimizer.zero_grad()
    (losses["loss_objective"] + losses["loss_entropy"]).backward()
    optimizer.step()
    if (advantage != 0).any():  # a group's episodes differ in return: the LLM learns
        assert any(not torch.equal(a, b) for a, b in zip(before, loss.parameters_to_train(), strict=True))
    else:  # all equal: GRPO has nothing to learn from them
        assert losses["loss_objective"].item() == 0.0
