"""PPO-GLAM (Carta et al. 2023), the baseline of SAC-GLAM's paper (Table 1), and PPO with HER (App. G).

    python examples/ppo_glam.py                          # the "cpu" preset: runs anywhere, offline
    python examples/ppo_glam.py --preset ppo_glam        # Table 1 (Flan-T5, LoRA, 4-bit, GPU)
    python examples/ppo_glam.py her=true her_filter=aligned  # App. G: clipped PPO on relabeled, aligned goals
    python examples/ppo_glam.py her=true ppo_loss=kl epochs=4  # any field of PPOGLAMConfig
    python examples/ppo_glam.py --run-dir runs/a --resume  # continue exactly where it stopped
    torchrun --nproc-per-node 4 examples/ppo_glam.py ...   # data parallel (or the Slurm launcher)
    ppo-glam ...                                          # the same, as an installed command

The loop: act with the LLM policy in 32 environments for 64 steps, recording the log-probability
of each action; then compute GAE advantages on that rollout of 2048 transitions (with HER, also on
its pieces relabeled with the goals the social partner reported) and take 16 epochs of
minibatches of 256 of the PPO loss, Adam and gradient clipping. Everything else (command line,
ranks and seeds, resume, checkpoints, logs, evaluation, stops) is the run harness,
``torchrl_glam/training/run.py``.
"""

from __future__ import annotations

import sys

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOGLAMConfig
from torchrl_glam.training.cli import parse_command_line, script_command_line


def main(argv: list[str] | None = None) -> int:
    cfg, options = parse_command_line(PPOGLAMConfig, PPO_PRESETS, argv, __doc__)
    cfg.check_device()  # a GPU this machine lacks: refused before TorchRL and the model load
    cfg.check_model()  # a model that cannot be found (a path, or the hub offline): likewise
    # torch, TorchRL and the agent load after the command line: --help and a refused field answer at once
    from torchrl_glam.algorithms.ppo_glam.build import make_loss
    from torchrl_glam.algorithms.ppo_glam.rollout import Rollout
    from torchrl_glam.algorithms.ppo_glam.update import PPOGLAMUpdater
    from torchrl_glam.training.distributed import broadcast_parameters
    from torchrl_glam.training.run import StateOf, TrainingRun

    run = TrainingRun(cfg, options)  # per-rank fields, rates, discount: declared by the config class

    # ---- the loss (the agent: LLM scorer + actor; value head + PPO), its updater, the rollout
    loss = make_loss(cfg)
    agent = loss.glam_agent
    broadcast_parameters(loss.parameters())  # rank 0's initial weights everywhere
    updater = PPOGLAMUpdater(loss, cfg, run.world)
    rollout = Rollout(
        cfg.algorithm.rollout_steps, environment=cfg.environment
    )  # the steps collected since the last update
    td = run.start(
        {
            # the trainable weights: LLM adapters, value head
            "loss": StateOf(loss.trainable_state_dict, loss.load_trainable_state_dict),
            "updater": updater,
            "rollout": rollout,
        },
        greedy_policy=lambda t, greedy: agent.act(t, greedy, with_scores=True),  # scores: for transcripts
        optimizers=updater.optimizers,
    )

    with run:
        while run.running():
            # ---- act in every environment with the current policy, keeping its log-probabilities
            agent.act(td, with_log_prob=True)
            step, td, _ = run.step(td)

            # ---- every rollout_steps: GAE (+ HER), then epochs x minibatches of the PPO loss
            full_rollout = rollout.add(step)
            if full_rollout is not None:
                for metrics in updater.update(full_rollout, rollout.reported_before):
                    run.log_update(metrics)
            run.end_iteration(updates=updater.updates)
    return run.finish(f"{updater.iterations} updates ({updater.updates} gradient steps)")


#: the command line (``ppo-glam``, ``examples/ppo_glam.py``): refusals printed without a traceback.
cli = script_command_line(main)


if __name__ == "__main__":
    sys.exit(cli())
