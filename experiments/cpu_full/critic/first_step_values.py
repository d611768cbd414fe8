"""Why does SAC-GLAM's critic rank a grasp goal's object low at the first step? The soft value
behind each first "Go to", split in its parts, on a run's checkpoint.

At the first step of a grasp goal "Grasp D" (the ``grasp_first_step`` states of ``object_choice.py``,
the same 1,024 "train" episodes), every "Go to k" leads to a known state: the same scene with the
agent on object k. For each such next state s' this measures, with the checkpoint's actor pi and its
smaller Q-head:

- ``q_first``: Q(s, Go to k), the critic's value of the first step itself;
- ``expected_q``: E_pi[Q(s', .)], the value the target bootstraps from, without the entropy bonus;
- ``entropy_bonus``: alpha * H(pi(. | s')), what SAC's soft value adds to it;
- ``p_grasp``: pi(Grasp | s'), whether the policy grasps once there (grasping the goal's object is
  the success);
- ``q_grasp``: Q(s', Grasp), the critic's value of that grasp (1 where it succeeds, for a critic
  that knows).

averaged over the "Go to" candidates of three kinds: ``goal_object`` (an object matching D),
``supply`` (water or food not matching D), ``other`` (any other object). A one-step look: SAC's
targets here are 3-step, but the soft value at s' is where the entropy bonus enters first.

    python experiments/cpu_full/critic/first_step_values.py RUN_DIR_OR_CHECKPOINT [...]

A checkpoint file (e.g. a copy kept while the run went on) is read as its run directory's
``checkpoint.pt`` would be.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from object_choice import EPISODES, is_supply, load_run_or_checkpoint, useful_actions  # noqa: E402

from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GOAL_TYPES  # noqa: E402
from torchrl_glam.objectives.common import score_states  # noqa: E402
from torchrl_glam.training.factories import make_eval_envs  # noqa: E402

PLAYGROUND = get_environment("playground")  # the environment object the library takes

KINDS = ("goal_object", "supply", "other")
torch.set_num_threads(1)


@torch.no_grad()
def policy_and_values(agent, states):
    """pi [B, A] (masked softmax of the scores, the actor's distribution) and min-Q [B, A]."""
    scored = score_states(agent.scorer, states, environment=PLAYGROUND)
    mask = scored["action_mask"]
    pi = scored["action_scores"].masked_fill(~mask, float("-inf")).softmax(-1)
    q = agent.q_values(TensorDict(scored, batch_size=states.batch_size)).min(0).values
    return pi, q, mask


@torch.no_grad()
def first_step_values(agent, env) -> dict[str, list[tuple[float, ...]]]:
    env.set_seed(env.seed_value)
    td = env.reset()
    grasp = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()] == GOAL_TYPES.index("grasp"))
    s0 = td[grasp.nonzero().squeeze(-1)].select("goal_id", "objects", "agent_on", "held", "grown")
    _, q0, _ = policy_and_values(agent, s0)
    alpha = float(agent.alpha())
    num_objects = s0["objects"].shape[-1]
    grasp_action = num_objects  # candidates: "Go to" each object, then "Grasp", then "Release"
    rows = {kind: [] for kind in KINDS}
    for k in range(num_objects):
        s1 = s0.clone()
        s1["agent_on"] = torch.full_like(s1["agent_on"], k)
        pi, q1, mask = policy_and_values(agent, s1)
        expected_q = (pi * q1.masked_fill(~mask, 0.0)).sum(-1)
        entropy = -(pi * pi.clamp_min(1e-12).log()).sum(-1)
        for i in range(len(s0)):
            scene = s0["objects"][i].tolist()
            useful = useful_actions(env.catalogue, int(s0["goal_id"][i]), scene, -1)
            kind = "goal_object" if k in useful else "supply" if is_supply(scene[k]) else "other"
            rows[kind].append(
                (
                    float(q0[i, k]),
                    float(expected_q[i]),
                    alpha * float(entropy[i]),
                    float(pi[i, grasp_action]),
                    float(q1[i, grasp_action]),
                )
            )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="SAC-GLAM run directories or checkpoint files")
    args = parser.parse_args()
    print("run,env_steps,alpha,kind,candidates,q_first,expected_q,entropy_bonus,p_grasp,q_grasp")
    for run in args.runs:
        cfg, agent, steps = load_run_or_checkpoint(run)
        env = make_eval_envs(cfg.replace(eval_sets=["train"], eval_episodes=EPISODES))["train"]
        for kind, values in first_step_values(agent, env).items():
            means = np.mean(values, axis=0) if values else [float("nan")] * 5
            print(
                f"{run},{steps},{float(agent.alpha()):.4f},{kind},{len(values)}," + ",".join(f"{x:.3f}" for x in means),
                flush=True,
            )
