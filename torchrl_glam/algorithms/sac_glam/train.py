"""SAC-GLAM (Gaven et al. 2024): Soft Actor-Critic with hindsight relabeling for an LLM agent.

    python examples/sac_glam.py                          # the "cpu" preset: runs anywhere, offline
    python examples/sac_glam.py --preset sac_glam_her    # Table 3 (Flan-T5, LoRA, 4-bit, GPU)
    python examples/sac_glam.py batch_size=64 her=false  # any field of SACGLAMConfig
    python examples/sac_glam.py --run-dir runs/a --resume  # continue exactly where it stopped
    torchrun --nproc-per-node 4 examples/sac_glam.py ...   # data parallel (or the Slurm launcher)
    sac-glam ...                                          # the same, as an installed command

The loop follows the paper's algorithm: act with the LLM policy in 32 environments; at the end of
each episode add its n-step transitions (and, with HER, its sections relabeled with the goals the
social partner reported) to prioritized replay; every ``update_frequency`` transitions take
``num_updates`` gradient steps of DiscreteSACLoss on batches of ``batch_size``. Everything else
(command line, ranks and seeds, resume, checkpoints, logs, evaluation, stops) is the run harness,
``torchrl_glam/training/run.py``.
"""

from __future__ import annotations

import sys

from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
from torchrl_glam.training.cli import parse_command_line, script_command_line


def main(argv: list[str] | None = None) -> int:
    cfg, options = parse_command_line(SACGLAMConfig, PRESETS, argv, __doc__)
    cfg.check_device()  # a GPU this machine lacks: refused before TorchRL and the model load
    cfg.check_model()  # a model that cannot be found (a path, or the hub offline): likewise
    # torch, TorchRL and the agent load after the command line: --help and a refused field answer at once
    from torchrl_glam.algorithms.sac_glam.build import (
        make_episode_processing,
        make_goal_choice,
        make_loss,
        make_replay,
        num_actions,
    )
    from torchrl_glam.algorithms.sac_glam.update import SACGLAMUpdater
    from torchrl_glam.training.distributed import all_true, broadcast_parameters
    from torchrl_glam.training.run import StateOf, TrainingRun

    run = TrainingRun(cfg, options)  # per-rank fields, rates, discount: declared by the config class

    # ---- the loss (the agent: LLM scorer + actor; twin critic heads + DiscreteSACLoss), replay, episode processing
    loss = make_loss(cfg, num_actions=num_actions(cfg, run.env))
    agent = loss.glam_agent
    broadcast_parameters(loss.parameters())  # rank 0's initial weights everywhere
    replay = make_replay(cfg)
    her, noop_twins, nstep = make_episode_processing(cfg)
    updater = SACGLAMUpdater(loss, replay, cfg, run.world)
    pieces = {
        "loss": StateOf(loss.trainable_state_dict, loss.load_trainable_state_dict),  # LLM adapters, heads, alpha
        "updater": updater,
        "replay": replay,
    }
    if her is not None:  # its draws' generator and the goals reported so far (the negatives' pool)
        pieces["her"] = her
    if noop_twins is not None:
        pieces["noop_twins"] = noop_twins
    goal_choice = make_goal_choice(cfg, run.env)  # autotelic: the agent picks goals it discovered
    if goal_choice is not None:
        pieces["autotelic"] = goal_choice
    td = run.start(
        pieces,
        greedy_policy=lambda t, greedy: agent.act(t, greedy, with_scores=True),  # scores: for transcripts
        optimizers=updater.optimizers,
        env_transform=goal_choice,
    )

    with run:
        while run.running():
            # ---- act in every environment with the current policy
            agent.act(td)
            _, td, episodes = run.step(td)

            # ---- finished episodes -> (hindsight relabeling) -> (no-op twins) -> n-step transitions -> replay
            if episodes is not None:
                if her is not None:
                    episodes = her(episodes)
                if noop_twins is not None:
                    episodes = noop_twins(episodes)
                replay.extend(nstep(episodes))

            # ---- every update_frequency transitions: num_updates gradient steps
            if run.every(cfg.algorithm.update_frequency) and all_true(len(replay) >= run.per_rank("learning_starts")):
                for _ in range(cfg.algorithm.num_updates):
                    run.log_update(updater.step(env_steps=run.steps), replay)
            if goal_choice is not None and run.logger and run.every(cfg.run.log_every):
                run.logger.autotelic(goal_choice, run.steps)  # discovered goals, LP choices
            run.end_iteration(updates=updater.updates)
    return run.finish(f"{updater.updates} updates")


#: the command line (``sac-glam``, ``examples/*.py``): refusals printed without a traceback.
cli = script_command_line(main)


if __name__ == "__main__":
    sys.exit(cli())
