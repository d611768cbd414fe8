"""GLAMAgent: the scorer module, the actor, the environment and the policies of an LLM agent, built
once; the objectives act through theirs, which shares their LLM without entering their state dicts."""

import torch
from tensordict.nn import TensorDictModule

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.modules import GLAMAgent, make_critic_heads, make_scorer, make_value_head
from torchrl_glam.objectives import PPOGLAMLoss, SACGLAMLoss
from torchrl_glam.training.factories import act, agent_policy

HIDDEN = 64  # the offline tiny T5's d_model: its value heads' input

PLAYGROUND = get_environment("playground")  # the environment object the library takes


def test_the_agent_builds_its_scorer_and_policies_once_and_holds_the_llm_once():
    scorer = make_scorer(None).module
    agent = GLAMAgent(scorer, environment=PLAYGROUND)
    assert isinstance(agent.scorer, TensorDictModule) and agent.llm is scorer
    assert agent.policy() is agent.policy() and agent.policy(True) is agent.policy(True)
    assert agent.policy() is not agent.policy(True)
    llm_keys = {f"scorer.module.{k}" for k in scorer.state_dict()}
    assert set(agent.state_dict()) == llm_keys  # the policies share the scorer, unregistered
    assert GLAMAgent.of(agent) is agent


def test_the_agent_acts_as_its_policy_samples_and_greedily():
    agent = GLAMAgent(make_scorer(None).module, environment=PLAYGROUND)
    env = PlaygroundTextEnv(num_envs=4, seed=0, text=False)
    td = env.reset()
    torch.manual_seed(0)
    sampled = agent.act(td.clone(), with_log_prob=True)
    torch.manual_seed(0)
    expected = agent.policy(return_log_prob=True)(td.select(*agent.environment.state_keys, "action_mask"))
    assert torch.equal(sampled["action"], expected["action"])
    assert torch.equal(sampled["sample_log_prob"], expected["sample_log_prob"])
    assert torch.equal(sampled["behaviour_scores"], expected["action_scores"])
    greedy = agent.act(td.clone(), greedy=True)
    assert torch.equal(greedy["action"], expected["action_scores"].masked_fill(~td["action_mask"], -1e9).argmax(-1))
    assert "sample_log_prob" not in greedy.keys()


def test_objectives_take_an_agent_or_a_scorer_with_the_same_state_dict():
    scorer = make_scorer(None).module
    from_scorer = SACGLAMLoss(
        scorer, make_critic_heads(scorer.hidden_size, width=16), num_actions=5, environment=PLAYGROUND
    )
    agent = GLAMAgent(scorer, environment=PLAYGROUND)
    from_agent = SACGLAMLoss(agent, make_critic_heads(scorer.hidden_size, width=16), num_actions=5)
    assert from_agent.glam_agent is agent and from_agent.scorer is scorer
    assert set(from_agent.state_dict()) == set(from_scorer.state_dict())
    assert not any(k.startswith("glam_agent") for k in from_scorer.state_dict())
    assert from_scorer.glam_agent.llm is from_scorer.scorer
    ppo = PPOGLAMLoss(agent, value_network=make_value_head(HIDDEN, 16))
    assert ppo.glam_agent is agent and ppo.environment is agent.environment
    assert set(
        PPOGLAMLoss(scorer, value_network=make_value_head(HIDDEN, 16), environment=PLAYGROUND).state_dict()
    ) == set(ppo.state_dict())
    # the training helpers act through the objective's agent
    assert agent_policy(from_scorer) is from_scorer.glam_agent.policy()
    td = PlaygroundTextEnv(num_envs=2, seed=0, text=False).reset()
    assert act(from_agent, td, greedy=True)["action"].shape == (2,)
