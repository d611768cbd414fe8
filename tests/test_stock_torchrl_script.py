"""The package's pieces in a stock TorchRL script, through public names only: a ``Collector``
with the library's policy module on the environment, a ``ReplayBuffer`` that renders text at
sampling time, the SAC-GLAM loss on a sampled batch, one optimiser step and TorchRL's soft update of
the target heads."""

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_glam.envs.playground import STATE_KEYS, PlaygroundTextEnv, RenderText
from torchrl_glam.modules import GLAMAgent, make_critic_heads, make_scorer
from torchrl_glam.objectives.sac_glam import SACGLAMLoss


# The policy keeps no state between steps, so it needs no "is_init"; TorchRL 0.14 warns that from
# 0.15 a Collector appends an InitTracker to every env that lacks one. Both choices work: False
# (the README's snippet) keeps the data as it is, True is 0.15's default.
@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("auto_register_policy_transforms", [False, True])
def test_collector_replay_buffer_and_sac_glam_loss_in_a_stock_torchrl_script(auto_register_policy_transforms):
    torch.manual_seed(0)
    env = PlaygroundTextEnv(num_envs=4, goals="simplified", text=False, seed=0)
    agent = GLAMAgent(make_scorer(None), environment="playground")
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
