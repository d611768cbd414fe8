"""GRPO-GLAM: group-relative policy optimisation (GRPO; GiGPO's step-level groups) on GLAM's
candidate-scoring policy, without a critic.

    python examples/grpo_glam.py                          # the "cpu" preset: runs anywhere, offline
    python examples/grpo_glam.py step_level=true          # GiGPO: step groups of identical states
    python examples/grpo_glam.py group_size=4 kl_coeff=0.01  # any field of GRPOGLAMConfig
    python examples/grpo_glam.py --run-dir runs/a --resume  # continue exactly where it stopped
    torchrun --nproc-per-node 4 examples/grpo_glam.py ...   # data parallel (or the Slurm launcher)
    grpo-glam ...                                          # the same, as an installed command

The loop: act with the LLM policy in 32 environments, each playing 8 episodes in a row from one
start (a group), recording the log-probability of each action; once 32 groups are complete, give
every step of an episode its group-relative advantage (its return against its group's mean, over
their standard deviation; with ``step_level`` plus that of its state among the group's identical
states) and take 16 epochs of minibatches of 256 of the clipped objective, Adam and gradient
clipping. Everything else (command line, ranks and seeds, resume, checkpoints, logs, evaluation,
stops) is the run harness, ``torchrl_glam/training/run.py``.
"""

from __future__ import annotations

import sys

from torchrl_glam.algorithms.grpo_glam.config import GRPO_PRESETS, GRPOGLAMConfig
from torchrl_glam.training.cli import parse_command_line, script_command_line


def main(argv: list[str] | None = None) -> int:
    cfg, options = parse_command_line(GRPOGLAMConfig, GRPO_PRESETS, argv, __doc__)
    cfg.check_device()  # a GPU this machine lacks: refused before TorchRL and the model load
    cfg.check_model()  # a model that cannot be found (a path, or the hub offline): likewise
    # torch, TorchRL and the agent load after the command line: --help and a refused field answer at once
    from torchrl_glam.algorithms.grpo_glam.build import make_loss
    from torchrl_glam.algorithms.grpo_glam.groups import Groups, RepeatedStarts
    from torchrl_glam.algorithms.grpo_glam.update import GRPOGLAMUpdater
    from torchrl_glam.training.distributed import broadcast_parameters
    from torchrl_glam.training.run import StateOf, TrainingRun

    run = TrainingRun(cfg, options)  # per-rank fields, rates: declared by the config class

    # ---- the loss (the agent: LLM scorer + actor; clipped objective, no critic), its updater, the groups
    loss = make_loss(cfg)
    agent = loss.glam_agent
    broadcast_parameters(loss.parameters())  # rank 0's initial weights everywhere
    updater = GRPOGLAMUpdater(loss, cfg, run.world)
    G, num_envs = cfg.algorithm.group_size, run.env.num_envs
    starts = RepeatedStarts(num_envs, G, environment=cfg.environment)  # G episodes in a row from one start
    groups = Groups(num_envs, G, cfg.env.max_steps, environment=cfg.environment)
    td = run.start(
        {
            "loss": StateOf(loss.trainable_state_dict, loss.load_trainable_state_dict),
            "updater": updater,
            "starts": starts,
            "groups": groups,
        },
        greedy_policy=lambda t, greedy: agent.act(t, greedy, with_scores=True),  # scores: for transcripts
        optimizers=updater.optimizers,
        env_transform=starts,
    )

    with run:
        while run.running():
            # ---- act in every environment with the current policy, keeping its log-probabilities
            agent.act(td, with_log_prob=True)
            step, td, _ = run.step(td)

            # ---- once enough groups are complete: group-relative advantages, epochs x minibatches
            groups.add(step)
            if updater.ready(len(groups)):
                for metrics in updater.update(groups.take()):
                    run.log_update(metrics)
            run.end_iteration(updates=updater.updates)
    return run.finish(f"{updater.iterations} updates ({updater.updates} gradient steps)")


#: the command line (``grpo-glam``, ``examples/grpo_glam.py``): refusals printed without a traceback.
cli = script_command_line(main)


if __name__ == "__main__":
    sys.exit(cli())
