"""Is the greedy policy's plateau the critic's or the actor's? Evaluates a run's final checkpoint on
its own "train" evaluation episodes three ways: the actor's mode (the run's greedy evaluation), a
sample of the actor (its sampled evaluation), and the critic's greedy policy (argmax over the legal
candidates of the smaller of the two Q-heads).

    python docs/results/cpu_full/critic_greedy.py RUN_DIR [RUN_DIR ...]
"""
import json
import sys

import torch
from tensordict import TensorDict

from torchrl_glam.modules import ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY
from torchrl_glam.training.checkpoint import load_checkpoint
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import act, make_eval_envs
from torchrl_glam.training.sac import make_agent
from torchrl_glam.training.sac_config import SACGLAMConfig

torch.set_num_threads(1)


@torch.no_grad()
def critic_greedy(agent, td, greedy=True):
    states = agent.score(td)
    hidden = states[ACTION_HIDDEN_KEY if agent.hidden_key == ACTION_HIDDEN_KEY else PROMPT_HIDDEN_KEY]
    q = agent.q_values(TensorDict({agent.hidden_key: hidden}, batch_size=td.batch_size)).min(0).values
    td.set("action", q.masked_fill(~states["action_mask"], float("-inf")).argmax(-1))
    return td


print("run,env_steps,policy,success,grasp,grow,grow-then-grasp,grow-then-grow")
for run_dir in sys.argv[1:]:
    cfg = SACGLAMConfig.from_dict(json.load(open(f"{run_dir}/config.json"))).replace(eval_sets=["train"])
    agent = make_agent(cfg, num_actions=8)
    state = load_checkpoint(run_dir)
    agent.load_trainable_state_dict(state["agent"])
    env = make_eval_envs(cfg)["train"]
    policies = {"actor_greedy": (lambda td, greedy: act(agent, td, greedy), True),
                "actor_sampled": (lambda td, greedy: act(agent, td, greedy), False),
                "critic_greedy": (lambda td, greedy: critic_greedy(agent, td), True)}
    for name, (policy, greedy) in policies.items():
        r = evaluate(policy, env, greedy=greedy)
        print(f"{run_dir},{state['assembler']['env_steps']},{name},{r['success']:.3f},"
              + ",".join(f"{r['success/' + t]:.2f}" for t in ("grasp", "grow", "grow-then-grasp", "grow-then-grow")),
              flush=True)
