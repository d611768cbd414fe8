"""PPO-GLAM (Carta et al. 2023), the baseline of SAC-GLAM's paper (Table 1), and PPO with HER (App. G).

    python examples/ppo_glam.py                          # the "cpu" preset: runs anywhere, offline
    python examples/ppo_glam.py --preset ppo_glam        # Table 1 (Flan-T5, LoRA, 4-bit, GPU)
    python examples/ppo_glam.py --preset cpu_her         # App. G: clipped PPO on relabeled data
    python examples/ppo_glam.py her=true her_loss=kl her_filter=aligned   # any field of PPOGLAMConfig
    python examples/ppo_glam.py --run-dir runs/a --resume  # continue exactly where it stopped
    torchrun --nproc-per-node 4 examples/ppo_glam.py ...   # data parallel (or the Slurm launcher)

The loop: act with the LLM policy in 32 environments for 64 steps, recording the log-probability
of each action; then compute GAE advantages on that rollout of 2048 transitions (with HER, also on
its pieces relabeled with the goals the social partner reported) and take 16 epochs of
minibatches of 256 of the PPO loss, Adam and gradient clipping.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from pathlib import Path

from tqdm import tqdm

from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.training.checkpoint import (
    load_checkpoint,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
)
from torchrl_glam.training.distributed import any_true, broadcast_parameters, init_distributed
from torchrl_glam.training.evaluation import evaluate
from torchrl_glam.training.factories import NonFiniteLossError, act, make_env, make_eval_envs
from torchrl_glam.training.logging import RunLogger
from torchrl_glam.training.ppo import PPOGLAMUpdater, Rollout, make_ppo_agent
from torchrl_glam.training.ppo_config import PPO_PRESETS, make_ppo_config, parse_ppo_overrides
from torchrl_glam.training.preemption import PREEMPTED, STOP, stop_on_signals


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", choices=sorted(PPO_PRESETS))
    parser.add_argument("--run-dir", default=None, help="where logs and checkpoints go (run_dir=...)")
    parser.add_argument("--resume", action="store_true", help="continue from run_dir's checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("overrides", nargs="*", help="field=value overrides of the preset")
    args = parser.parse_intermixed_args(argv)  # overrides may come before or after the flags
    overrides = parse_ppo_overrides(args.overrides)
    if args.run_dir:
        overrides["run_dir"] = args.run_dir
    return make_ppo_config(args.preset, overrides), args


def main(argv=None) -> int:
    cfg, args = parse_args(argv)
    rank, world = init_distributed(cfg.device)  # several processes: data parallel (see distributed.py)
    if cfg.num_envs % world or cfg.minibatch_size % world:
        raise ValueError(f"num_envs={cfg.num_envs} and minibatch_size={cfg.minibatch_size} must divide "
                         f"by the {world} ranks")
    main_rank = rank == 0
    seed_everything(cfg.seed)  # the same initial weights on every rank

    # ---- the environment, the agent (LLM scorer + actor + value head + PPO loss), the rollout
    env = make_env(cfg, num_envs=cfg.num_envs // world, seed=cfg.seed + 1000 * rank)
    agent = make_ppo_agent(cfg)
    broadcast_parameters(agent.parameters())
    updater = PPOGLAMUpdater(agent, cfg, world)
    rollout = Rollout(cfg.rollout_steps)
    assembler = EpisodeAssembler(env.num_envs, cfg.max_steps)  # finished episodes, for the logs
    eval_envs = make_eval_envs(cfg)  # fixed seeds: the same episodes for every algorithm
    seed_everything(cfg.seed + rank)  # ranks act differently

    # ---- resume: everything that changes during a run is in the checkpoint (one file per rank)
    checkpoint_dir = Path(cfg.run_dir) / ("" if main_rank else f"rank{rank}")
    state = load_checkpoint(checkpoint_dir) if args.resume else None
    wall_offset = 0.0
    if state is not None:
        agent.load_trainable_state_dict(state["agent"])
        updater.load_state_dict(state["updater"])
        rollout.load_state_dict(state["rollout"])
        env.load_state_dict(state["env"])
        assembler.load_state_dict(state["assembler"])
        set_rng_state(state["rng"])
        wall_offset = state["wall_seconds"]
        td = env.observation()
        print(f"rank {rank}: resumed from {checkpoint_dir} at {assembler.env_steps * world} environment steps")
    else:
        td = env.reset()
    logger = RunLogger(cfg) if main_rank else None
    start = time.perf_counter() - wall_offset

    def checkpoint():
        save_checkpoint(
            {
                "agent": agent.trainable_state_dict(),
                "updater": updater.state_dict(),
                "rollout": rollout.state_dict(),  # the steps collected since the last update
                "env": env.state_dict(),
                "assembler": assembler.state_dict(),
                "rng": rng_state(),
                "wall_seconds": time.perf_counter() - start,
                "config": cfg.to_dict(),
            },
            checkpoint_dir,
        )

    stop_on_signals()  # Ctrl-C, SIGTERM: stop at the end of the iteration, with a checkpoint
    recent = deque(maxlen=200)  # recent episode successes, for the progress bar
    progress = tqdm(total=cfg.total_steps, initial=assembler.env_steps * world, unit="step",
                    disable=args.no_progress or not main_rank, dynamic_ncols=True)
    steps = assembler.env_steps * world  # environment steps over all ranks
    try:
        while steps < cfg.total_steps:
            # ---- act in every environment with the current policy, keeping its log-probabilities
            act(agent, td, with_log_prob=True)
            step, td = env.step_and_maybe_reset(td)
            full_rollout = rollout.add(step)
            episodes = assembler.add(step)
            steps = assembler.env_steps * world
            progress.update(cfg.num_envs)
            if episodes is not None:
                if logger:
                    logger.episodes(episodes)
                recent.extend(episodes["next", "terminated"].any(-1).tolist())

            # ---- every rollout_steps: GAE (+ HER), then epochs x minibatches of the PPO loss
            if full_rollout is not None:
                for metrics in updater.update(full_rollout):
                    if logger:
                        logger.update(metrics, steps)

            if logger and steps % cfg.log_every < cfg.num_envs:
                logger.flush(steps, time.perf_counter() - start)
                progress.set_postfix(success=f"{sum(recent) / max(len(recent), 1):.2f}",
                                     updates=updater.updates)
            if main_rank and (steps % cfg.eval_every < cfg.num_envs or steps >= cfg.total_steps):
                for name, eval_env in eval_envs.items():
                    logger.evaluation(name, evaluate(lambda t, greedy: act(agent, t, greedy), eval_env),
                                      steps, time.perf_counter() - start)
            if steps % cfg.checkpoint_every < cfg.num_envs or steps >= cfg.total_steps:
                checkpoint()
            if any_true(STOP.requested):  # preemption, time limit, Ctrl-C: save and return
                checkpoint()
                progress.close()
                print(f"rank {rank}: stopped at {steps} environment steps; checkpoint in {checkpoint_dir}")
                STOP.acknowledge()
                return PREEMPTED
    except NonFiniteLossError as err:
        progress.close()
        print(f"stopped: {err}. The last good checkpoint is kept in {cfg.run_dir}; resume from it "
              "with --resume after changing the settings (e.g. a lower learning rate).", file=sys.stderr)
        return 1
    progress.close()
    if main_rank:
        final = logger.last_evaluation
        print(f"done: {steps} steps, {updater.iterations} updates ({updater.updates} gradient steps), "
              f"{time.perf_counter() - start:.0f} s; greedy success "
              + ", ".join(f"{k} {v:.2f}" for k, v in final.items() if k.endswith("success")))
        print(f"logs and checkpoint in {Path(cfg.run_dir).resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
