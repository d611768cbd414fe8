"""Can SAC-GLAM's critic (the cpu_full preset's tiny T5 and twin heads, from the pretrained model)
learn the contrast it misses one step from the goal: in one state, the candidate that reaches the
goal at once against one that changes nothing? A diagnostic on *oracle* labels, the counterpart of
``capacity_probe.py`` (the grasp's object) for ``one_step_from_goal.py``'s finding.

States: those one step from the goal (a candidate wins at once) with a candidate that changes
nothing, visited by a trained run's sampled policy on training goals as training samples them
(``RUN`` only supplies the states; the probe's critic starts from the preset's pretrained model).
Labels, found by trying each candidate in a copy of the environment: 1 for a winning candidate,
``--no-op-label`` for one that changes nothing (0.9 by default: its exact value at gamma 0.9, the
winner being still there at the next step). Both heads are regressed on them, the LLM at
``--llm-lr`` (the runs' critic_llm_lr) and the heads at the preset's critic_lr, on the states of
one environment seed; printed on the states of another: the smaller head's mean Q of the winners
and of the no-ops, and the share of states where its best winner is above its best no-op. The
first row reads the run's own critic (trained by SAC) on the same states; when the run has an
immediate-success head (``success_loss_coef > 0``), a row ``success_head`` reads its P(success)
the same way (its label is this contrast, from the replay's own reward: 1 and 0).

    python experiments/cpu_full/critic/contrast_probe.py RUN [--steps 600] [--llm-lr 3e-4] [--no-op-label 0.9]
"""

import argparse
import sys
from pathlib import Path

import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.envs.playground import STATE_KEYS
from torchrl_glam.objectives.sac_glam import SUCCESS_LOGIT_KEY
from torchrl_glam.training.factories import agent_policy, make_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import CPU_FULL, load_run_or_checkpoint, one_step_outcomes, train_on_labels  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("run", help="a trained run (or checkpoint) whose sampled policy visits the states")
parser.add_argument("--steps", type=int, default=600)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--llm-lr", type=float, default=3e-4)
parser.add_argument("--no-op-label", type=float, default=0.9)
parser.add_argument("--num-envs", type=int, default=512)
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)


@torch.no_grad()
def contrast_states(policy, cfg, seed: int):
    """Compact states one step from the goal with a no-op candidate, and their [N, A] win / no-op
    masks, from one episode per sub-environment of the sampled policy."""
    env = make_env(cfg, num_envs=args.num_envs, goals="train", seed=seed)
    td, states, wins, no_ops = env.reset(), [], [], []
    for _ in range(env.max_steps):
        win, no_op = one_step_outcomes(env, td)
        keep = win.any(-1) & no_op.any(-1)
        states.append(td.select(*STATE_KEYS, "action_mask")[keep])
        wins.append(win[keep])
        no_ops.append(no_op[keep])
        with set_exploration_type(ExplorationType.RANDOM):
            td.set("action", policy(td.select(*STATE_KEYS, "action_mask"))["action"])
        td = env.step(td)["next"].exclude("reward", "done", "terminated", "truncated")
    return torch.cat(states), torch.cat(wins), torch.cat(no_ops)


run_cfg, run_agent, run_steps = load_run_or_checkpoint(args.run)
train, train_wins, train_no_ops = contrast_states(agent_policy(run_agent), run_cfg, seed=777)
test, test_wins, test_no_ops = contrast_states(agent_policy(run_agent), run_cfg, seed=778)
print(f"states: {len(train)} to train on, {len(test)} to test on", file=sys.stderr, flush=True)

cfg = make_config(CPU_FULL)
agent = make_loss(cfg, num_actions=train["action_mask"].shape[-1])
groups = agent.param_groups()
optimizers = [
    torch.optim.Adam(groups["heads"], lr=cfg.algorithm.critic_lr),
    torch.optim.Adam(groups["llm"], lr=args.llm_lr),
]


def head_inputs(agent, td) -> TensorDict:
    """The heads' inputs for compact states (their prompts rendered and scored by ``agent``'s LLM)."""
    scored = agent.score(td)
    return TensorDict({k: scored[k] for k in agent.head_keys}, batch_size=td.batch_size)


def q_values(agent, td):
    """[heads, N, A]: ``agent``'s Q-values of compact states."""
    return agent.q_values(head_inputs(agent, td))


def p_success(agent, td):
    """[N, A]: the immediate-success head's P(the candidate reaches the goal at once)."""
    return agent.success_head(head_inputs(agent, td).select(*agent.success_head.in_keys))[SUCCESS_LOGIT_KEY].sigmoid()


@torch.no_grad()
def readout(agent, values=lambda agent, td: agent.min_q_values(td)) -> str:
    """Mean value of the winners and of the no-ops, and the share of test states whose best winner
    is above their best no-op (by default the smaller Q-head's)."""
    q = torch.cat([values(agent, test[i : i + 256]) for i in range(0, len(test), 256)])
    best_win = q.masked_fill(~test_wins, float("-inf")).max(-1).values
    best_no_op = q.masked_fill(~test_no_ops, float("-inf")).max(-1).values
    return f"{q[test_wins].mean():.3f},{q[test_no_ops].mean():.3f},{(best_win > best_no_op).float().mean():.3f}"


print("critic,run,run_steps,states,steps,llm_lr,no_op_label,q_win,q_no_op,win_above_no_op")
print(f"run,{args.run},{run_steps},{len(test)},,,,{readout(run_agent)}", flush=True)
if run_agent.success_head is not None:
    print(f"success_head,{args.run},{run_steps},{len(test)},,,,{readout(run_agent, p_success)}", flush=True)


def batch_loss(step):
    index = torch.randint(len(train), (args.batch_size,))
    labelled = train_wins[index] | train_no_ops[index]
    target = torch.where(train_wins[index], 1.0, args.no_op_label)
    return (q_values(agent, train[index]) - target).pow(2)[:, labelled].mean()


train_on_labels(optimizers, batch_loss, args.steps)
print(f"probe,{args.run},{run_steps},{len(test)},{args.steps},{args.llm_lr},{args.no_op_label},{readout(agent)}")
