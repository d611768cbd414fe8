"""The run harness: everything a GLAM training script does besides its algorithm.

A training script (``torchrl_glam/algorithms/<algorithm>/train.py``) builds its agent and writes
its loop body; :class:`TrainingRun` does the rest, the same way for every algorithm:

* the command line of any config class (:func:`parse_command_line`: ``--preset``, ``--run-dir``,
  ``--resume``, ``--no-progress`` and typed ``field=value`` overrides; defined in ``cli.py``, which
  imports nothing heavy, so that ``--help`` and a refused field answer at once);
* rank and world (data parallel, ``distributed.py``), the per-rank share of the environments, and
  seeding (the same initial weights on every rank, then different acting per rank);
* the model an offline name means, built before anything else where this machine lacks it
  (``ResolvedModel.build``, with progress: making the loss only loads);
* the training environment and the :class:`EpisodeAssembler` that counts steps and finds finished
  episodes; the fixed greedy-evaluation environments;
* restore and save of any dict of stateful pieces through their ``state_dict`` /
  ``load_state_dict`` (:class:`StateOf` adapts other getter/setter pairs), plus the RNG states and
  the wall clock, in one atomic checkpoint per rank;
* the evaluate / log / checkpoint / stop schedule (:meth:`TrainingRun.end_iteration`), a logger and
  progress bar that are silent off rank 0, the NaN exit (exit code 1, the last good checkpoint
  kept), preemption (exit code :data:`PREEMPTED`), and the final report.

The shape of a script::

    cfg, options = parse_command_line(MyConfig, MY_PRESETS, argv)
    run = TrainingRun(cfg, options)  # MyConfig declares what the harness needs (GLAMConfig's ClassVars)
    agent = ...                                       # built after the run seeded every rank alike
    td = run.start({"loss": ..., "updater": ...}, greedy_policy=...)   # restore or reset
    with run:                                         # a non-finite loss ends the loop cleanly
        while run.running():
            ...                                       # act
            step, td, episodes = run.step(td)         # environment step, episodes, progress
            ...                                       # learn; run.log_update(metrics)
            run.end_iteration(updates=...)            # log, evaluate, checkpoint, stop
    return run.finish("N updates")                    # exit code and final report

What keeps a run safe (see README, "When things go wrong"): the constructor sets the thread count
and refuses or locks the run dir (``rundir.py``); :meth:`~TrainingRun.restore` refuses a resume
that would mix settings and applies the allowed changes (``resume.py``); :meth:`~TrainingRun.log_update`
stops a diverging run (``divergence.py``); checkpoints load without running code (``checkpoint.py``).
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from tensordict import TensorDictBase
from torchrl.envs import TransformedEnv
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm
from transformers.utils import logging as hf_logging

from torchrl_glam.data.episodes import EpisodeAssembler, episode_success
from torchrl_glam.envs.protocol import EnvironmentFilesError, EnvironmentStateError
from torchrl_glam.training import pace
from torchrl_glam.training.checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
)
from torchrl_glam.training.cli import (
    USAGE_ERROR,
    USER_ERROR_CLASSES,
    RunOptions,
    _final_success,
    command_line,
    default_run_dir,
    parse_command_line,
    resume_command,
)
from torchrl_glam.training.compatibility import written_by
from torchrl_glam.training.config import GLAMConfig
from torchrl_glam.training.distributed import any_true, init_distributed, rank_share
from torchrl_glam.training.divergence import DivergenceError, check_divergence
from torchrl_glam.training.evaluation import EVAL_SETS, evaluate
from torchrl_glam.training.factories import NonFiniteLossError, build_model, check_env, make_env, make_eval_envs
from torchrl_glam.training.logging import RunLogger, last_evaluations
from torchrl_glam.training.preemption import PREEMPTED, STOP, stop_on_signals
from torchrl_glam.training.provenance import record_environment
from torchrl_glam.training.report import write_report
from torchrl_glam.training.resume import ResumeError, apply_resume, resume_changes
from torchrl_glam.training.rundir import prepare_run_dir, truncate_logs
from torchrl_glam.training.runtime import apply_runtime

logger = logging.getLogger(__name__)

__all__ = [
    "PREEMPTED",
    "USAGE_ERROR",
    "USER_ERRORS",
    "RunOptions",
    "StateOf",
    "Stateful",
    "TrainingRun",
    "command_line",
    "default_run_dir",
    "parse_command_line",
]

#: Refusals whose message says what to do: a script's command line prints them without a traceback
#: (``cli.USER_ERROR_CLASSES``, which names them without importing them).
USER_ERRORS = tuple(getattr(importlib.import_module(module), name) for module, name in USER_ERROR_CLASSES)


class Stateful(Protocol):
    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> Any: ...


class StateOf:
    """A stateful piece from a getter and a setter, for objects whose state is not their
    ``state_dict`` (the agent's trainable weights only)."""

    def __init__(self, get: Callable[[], Any], set: Callable[[Any], Any]) -> None:
        self._get, self._set = get, set

    def state_dict(self) -> Any:
        return self._get()

    def load_state_dict(self, state: Any) -> None:
        self._set(state)


#: Entries of torchrl_glam 0.1.0's first checkpoint layout (HER's and the no-op twins' state, now in
#: their pieces): a checkpoint holding one is refused with the version that reads it.
LAYOUT_0_1_ENTRIES = ("her_generator", "her_goal_memory", "noop_twins_generator")


class TrainingRun:
    """One training process of a GLAM algorithm: see the module docstring for its life cycle.

    Attributes: ``cfg``, ``rank``, ``world``, ``main_rank``, ``env`` (this rank's share of
    ``cfg.env.num_envs``), ``assembler``, ``logger`` (``None`` off rank 0), ``checkpoint_dir``.
    The config class's ``PER_RANK_FIELDS``: the fields each rank gets its share of (:meth:`per_rank`),
    refused unless they divide by the world.
    """

    def __init__(self, cfg: GLAMConfig, options: RunOptions | None = None) -> None:
        self.cfg, self.options = cfg.validate(), options or RunOptions()  # before the run dir is touched
        apply_runtime(cfg)  # cfg.run.num_threads torch threads; a missing GPU fails here, before any model loads
        hf_logging.disable_progress_bar()  # transformers' own "Loading weights" bar: the run says what it does
        logging.getLogger("torchrl").setLevel(logging.WARNING)  # its INFO lines (storage sizes) are not for users
        self.rank, self.world = init_distributed(cfg.model.device)  # several processes: data parallel
        per_rank = type(cfg).PER_RANK_FIELDS
        uneven = [name for name in per_rank if cfg.get(name) % self.world]
        if uneven:
            listed = " and ".join(f"{name.rsplit('.', 1)[-1]}={cfg.get(name)}" for name in per_rank)
            raise ValueError(f"{listed} must divide by the {self.world} ranks")
        self.main_rank = self.rank == 0
        # an environment that contradicts its specs or sizes is refused before the run dir is touched,
        # on every rank alike (the same seed); before the seeding, which its short rollout would move
        check_env(cfg)
        # refuse a used run dir (unless --resume / --overwrite) and lock it against a second process
        prepare_run_dir(cfg.run.run_dir, self.options.resume, self.options.overwrite, self.rank, self.options.preset)
        # an offline model this machine lacks is built now, with progress (make_loss only loads)
        build_model(cfg)
        seed_everything(cfg.run.seed)  # the same initial weights on every rank
        self.env = make_env(cfg, num_envs=self.per_rank("num_envs"), seed=cfg.run.seed + 1000 * self.rank)
        self.acting_env = self.env  # the env, or the env under a transform that picks goals (autotelic)
        self.assembler = EpisodeAssembler(self.env.num_envs, cfg.env.max_steps, environment=cfg.environment)
        # one checkpoint per rank: each holds its own environments and replay
        self.checkpoint_dir = Path(cfg.run.run_dir) / ("" if self.main_rank else f"rank{self.rank}")
        self.logger: RunLogger | None = None
        self.pieces: dict[str, Stateful] = {}
        self.optimizers: dict[str, Any] = {}  # learning-rate field -> optimizer, for resume changes
        self.eval_envs: dict = {}
        self.greedy_policy: Callable | None = None
        self.recent = deque(maxlen=200)  # recent episode successes, for the progress bar
        self.progress: tqdm | None = None
        self.stopped = False  # a stop request was honoured (checkpoint written)
        # the step whose evaluation a stop request put off (run first thing after the resume)
        self.pending_evaluation: int | None = None
        self._logger_state: dict | None = None  # the restored logger's, until the logger exists
        self.failure: str | None = None  # why the run ended early (a non-finite loss)
        self._start = time.perf_counter()
        # (steps, time, evaluation seconds) at the last pace line
        self._pace_mark: tuple[int, float, float] | None = None
        self._evaluation_seconds = 0.0  # all evaluations' time so far, left out of the pace's rate
        self._last_evaluation_seconds = 0.0  # what the pace expects each evaluation still to come to take

    # ---- start-up
    @property
    def steps(self) -> int:
        """Environment steps over all ranks."""
        return self.assembler.env_steps * self.world

    def per_rank(self, name: str) -> int:
        """This rank's share of the config field ``name`` (:func:`~torchrl_glam.training.distributed.rank_share`)."""
        return rank_share(self.cfg, name, self.world)

    @property
    def wall_seconds(self) -> float:
        return time.perf_counter() - self._start

    def start(
        self,
        pieces: dict[str, Stateful],
        greedy_policy: Callable | None = None,
        optimizers: dict[str, Any] | None = None,
        env_transform=None,
    ) -> TensorDictBase:
        """Registers what the checkpoint holds (``pieces``, plus the environment and the assembler),
        builds the evaluation environments, seeds this rank, restores from the checkpoint under
        ``--resume`` (or resets the environment), and opens the logger and the progress bar.
        Returns the first observation. ``greedy_policy(td, greedy)`` writes "action" (the policy's
        mode, or a sample of it for an evaluation set that samples);
        ``optimizers`` maps each learning-rate field the config class declares
        (``LEARNING_RATE_FIELDS``; every one that is not ``None``) to the optimizer it drives (a
        resume may change learning rates); ``env_transform`` wraps the acting environment (a
        TorchRL transform; its state is the caller's to register as a piece)."""
        self.pieces = {**pieces, "env": self.env, "assembler": self.assembler}
        self.greedy_policy = greedy_policy
        self.optimizers = optimizers or {}
        self._check_optimizers()
        if env_transform is not None:
            self.acting_env = TransformedEnv(self.env, env_transform)
        self.eval_envs = make_eval_envs(self.cfg)  # fixed seeds: the same episodes for every algorithm
        seed_everything(self.cfg.run.seed + self.rank)  # ranks act and sample differently
        td = self.restore() if self.options.resume else None
        if self.main_rank:  # environment.json: what the run ran on; a resume elsewhere says so
            changed = record_environment(self.cfg.run.run_dir, resumed=td is not None)
            if changed:
                logger.warning(changed)
        if td is None:
            if self.options.resume and self.main_rank:  # a run killed before its first checkpoint
                truncate_logs(self.cfg.run.run_dir, 0)
            td = self.acting_env.reset()
        self.logger = RunLogger(self.cfg) if self.main_rank else None
        if self.logger is not None and self._logger_state is not None:
            self.logger.load_state_dict(self._logger_state)
        if self.pending_evaluation is not None and self.main_rank:
            self.evaluate()
        self.pending_evaluation = None
        stop_on_signals()  # Ctrl-C, SIGTERM: stop at the end of the iteration, with a checkpoint
        self.progress = tqdm(
            total=self.cfg.run.total_steps,
            initial=min(self.steps, self.cfg.run.total_steps),
            unit="step",
            # None (the default): tqdm shows the bar on a terminal only; piped logs get the
            # evaluation lines alone
            disable=True
            if not self.main_rank
            else (None if self.options.progress is None else not self.options.progress),
            dynamic_ncols=True,
        )
        self._pace_mark = (self.steps, time.perf_counter(), self._evaluation_seconds)
        if self.main_rank and self.steps < self.cfg.run.total_steps:
            run = self.cfg.run
            self._print(
                f"training to {run.total_steps} environment steps in {run.run_dir}; the greedy policy is "
                f"evaluated every {run.eval_every} steps on {', '.join(run.eval_sets)} ({run.eval_episodes} "
                "episodes each)"
            )
        return td

    def _check_optimizers(self) -> None:
        """Refuses optimisers under undeclared fields, and declared rates without their optimiser:
        a resume would not set (or set wrongly) the rate it says it changed."""
        config_class = type(self.cfg)
        declared = config_class.LEARNING_RATE_FIELDS
        given = {config_class.path_of(name) for name in self.optimizers}
        undeclared = sorted(given - set(declared))
        missing = [name for name in declared if name not in given and self.cfg.get(name) is not None]
        if self.optimizers and (undeclared or missing):
            raise ValueError(
                f"the optimizers given to TrainingRun.start ({', '.join(sorted(given))}) do not match "
                f"{config_class.__name__}.LEARNING_RATE_FIELDS ({', '.join(declared) or 'none'}): "
                + "; ".join(
                    [f"undeclared {', '.join(undeclared)}"] * bool(undeclared)
                    + [f"without an optimizer {', '.join(missing)}"] * bool(missing)
                )
                + ". Declare each rate on the config class and pass each optimizer under its rate's field"
            )

    def restore(self) -> TensorDictBase | None:
        """Loads this rank's checkpoint into the pieces; the current observation, or ``None``
        when there is no checkpoint (a fresh start)."""
        state = load_checkpoint(self.checkpoint_dir)
        if state is None:
            return None
        self._refuse_old_layout(state)
        self._require(state, ["config"])
        try:
            # refuses another algorithm's run, and a run that would mix settings
            changes = resume_changes(state["config"], self.cfg, state.get("algorithm"))
        except ResumeError as err:
            config_json = Path(self.cfg.run.run_dir) / "config.json"
            if config_json.exists() or "with changed settings (" not in str(err):
                raise
            # without config.json the resume started from the preset, not from the run's settings
            raise ResumeError(
                f"{config_json} is missing, so --resume took the settings of the preset and the command line "
                f"instead of the run's, and they differ from its checkpoint's. Put back that run's config.json, or "
                f"give the run's --preset and overrides again ({str(err).split('(', 1)[1].split(')', 1)[0]})"
            ) from None
        self._require(state, ["rng", "wall_seconds", *self.pieces])
        for name, piece in self.pieces.items():
            try:
                piece.load_state_dict(state[name])
            except EnvironmentFilesError:
                raise  # the environment's files, named with their fix: the checkpoint is not at fault
            except EnvironmentStateError as err:  # the environment's own words: what changed, and the fix
                raise CheckpointError(f"{self.checkpoint_dir / CHECKPOINT_NAME}: {err}") from err
            except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as err:
                raise CheckpointError(
                    f"{self.checkpoint_dir / CHECKPOINT_NAME}: its {name!r} does not fit this run "
                    f"({type(err).__name__}: {str(err)[:300]}). It was written by another version or "
                    "model: resume it with those, or start a new --run-dir."
                ) from err
        set_rng_state(state["rng"])
        self._start = time.perf_counter() - state["wall_seconds"]
        self.pending_evaluation = state.get("pending_evaluation")
        self._logger_state = state.get("logger")  # absent from older checkpoints: means restart
        apply_resume(self.cfg, changes, self.optimizers, self.steps, self.main_rank)
        print(f"{self._rank_prefix}resumed from {self.checkpoint_dir} at {self.steps} environment steps")
        return self.env.observation()

    def _refuse_old_layout(self, state: dict) -> None:
        old = [entry for entry in LAYOUT_0_1_ENTRIES if entry in state]
        if old:
            where = f"{self.checkpoint_dir / CHECKPOINT_NAME}"
            raise CheckpointError(written_by(where, "checkpoint_layout_0_1", f"its {', '.join(old)}"))

    def _require(self, state: dict, keys: list[str]) -> None:
        missing = [key for key in keys if key not in state]
        if missing:
            raise CheckpointError(
                f"{self.checkpoint_dir / CHECKPOINT_NAME} lacks {', '.join(missing)}: it is not a checkpoint of "
                "this training script. Resume it with the script that wrote it, or start a new --run-dir."
            )

    def checkpoint(self) -> None:
        state = {name: piece.state_dict() for name, piece in self.pieces.items()}
        state.update(
            rng=rng_state(),
            wall_seconds=self.wall_seconds,
            config=self.cfg.to_dict(),
            algorithm=type(self.cfg).ALGORITHM,
            pending_evaluation=self.pending_evaluation,
        )
        if self.logger is not None:
            state["logger"] = self.logger.state_dict()
        save_checkpoint(state, self.checkpoint_dir)

    # ---- the loop
    def running(self) -> bool:
        return not self.stopped and self.failure is None and self.steps < self.cfg.run.total_steps

    def every(self, period: int) -> bool:
        """Whether this iteration crossed a multiple of ``period`` environment steps."""
        return self.steps % period < self.cfg.env.num_envs

    def step(self, td: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase, TensorDictBase | None]:
        """One step of every environment with ``td["action"]``: (the step with its "next", the next
        observation, the episodes that finished or ``None``). Logs finished episodes."""
        step, td = self.acting_env.step_and_maybe_reset(td)
        episodes = self.assembler.add(step)
        # the last iteration may pass total_steps (whole iterations of num_envs steps); the bar stops at it
        self.progress.update(max(min(self.cfg.env.num_envs, self.cfg.run.total_steps - self.progress.n), 0))
        if episodes is not None:
            if self.logger:
                self.logger.episodes(episodes)
            self.recent.extend(episode_success(episodes).tolist())
        return step, td, episodes

    def log_update(self, metrics: dict[str, float], replay=None) -> None:
        """Logs one gradient step's metrics; a diverging critic or value stops the run."""
        check_divergence(metrics, self.cfg, self.steps)
        if self.logger:
            self.logger.update(metrics, self.steps, replay)

    def evaluate(self) -> None:
        """Evaluates the greedy policy on every evaluation set, logs it at this step and prints it
        (rank 0 calls it)."""
        started = time.perf_counter()
        head = f"evaluation at {self.steps} steps ({self.wall_seconds:.0f} s): success "
        bar = self.progress is not None and not self.progress.disable
        if bar:
            self.progress.set_description_str("evaluating")
        else:  # piped output: the line grows as each set is done (a set can take a minute)
            print(head, end="", flush=True)
        report = []
        final = self.steps >= self.cfg.run.total_steps  # the report shows a few of its episodes as text
        for name, eval_env in self.eval_envs.items():
            transcripts = [] if final else None
            results = evaluate(
                self.greedy_policy,
                eval_env,
                greedy=EVAL_SETS[name].greedy,
                goal_types=self.cfg.environment.goal_types,
                transcripts=transcripts,
                environment=self.cfg.environment,
            )
            self.logger.evaluation(name, results, self.steps, self.wall_seconds)
            if transcripts:
                self.logger.final_episodes(name, transcripts)
            report.append(f"{name} {results['success']:.2f}")
            if not bar:
                print(("" if len(report) == 1 else ", ") + report[-1], end="", flush=True)
        if bar:
            self.progress.set_description_str("")
            self.progress.write(head + ", ".join(report))
        else:
            print(flush=True)
        self._last_evaluation_seconds = time.perf_counter() - started
        self._evaluation_seconds += self._last_evaluation_seconds

    def end_iteration(self, **postfix) -> None:
        """Logs, evaluates, checkpoints on their schedules; honours a stop request (every rank
        agrees, writes its checkpoint and the loop ends). ``postfix``: progress-bar values."""
        steps, cfg, last = self.steps, self.cfg, self.steps >= self.cfg.run.total_steps
        stop = any_true(STOP.requested)  # preemption, time limit, Ctrl-C: save and return
        if self.logger and self.every(cfg.run.log_every):
            self.logger.flush(steps, self.wall_seconds)
            # the success of the sampled (exploring) policy on its last 200 training episodes
            self.progress.set_postfix(sampled_success=f"{sum(self.recent) / max(len(self.recent), 1):.2f}", **postfix)
        if self.main_rank and (self.every(cfg.run.eval_every) or last) and self.greedy_policy is not None:
            if stop:  # a stop does not wait for an evaluation: the resumed run does it first, same weights
                self.pending_evaluation = steps
            else:
                self.evaluate()
        if stop or self.every(cfg.run.checkpoint_every) or last:
            self.checkpoint()
        if self.main_rank and self.progress.disable and not (stop or last):
            self._pace()
        if stop:
            self.progress.close()
            print(f"{self._rank_prefix}stopped at {steps} environment steps; checkpoint in {self.checkpoint_dir}")
            if self.main_rank:
                print("continue it with: " + resume_command(self.options.preset, self.cfg.run.run_dir), flush=True)
            self.stopped = True
            STOP.acknowledge()

    def _pace(self) -> None:
        """Without a bar (piped output): every ``pace.PACE_EVERY_SECONDS``, how fast the run goes
        and when its next evaluation comes."""
        now, (steps, then, evaluated) = time.perf_counter(), self._pace_mark
        # the training's own time: an evaluation in the window would make it look many times slower,
        # and a window of one iteration after it (no update in it) many times faster
        training_seconds = now - then - (self._evaluation_seconds - evaluated)
        if training_seconds < pace.PACE_EVERY_SECONDS:
            return
        run = self.cfg.run
        upcoming = (self.steps // run.eval_every + 1) * run.eval_every  # the next multiple every() crosses
        next_evaluation = min(upcoming, run.total_steps) if self.greedy_policy is not None else None
        rate = (self.steps - steps) / max(training_seconds, 1e-9)
        # the multiples of eval_every still to come, and the last step (a pace line comes before it)
        evaluations_left = (
            (run.total_steps - 1) // run.eval_every - self.steps // run.eval_every + 1
            if next_evaluation is not None
            else 0
        )
        evaluation_seconds = evaluations_left * self._last_evaluation_seconds
        print(pace.pace_line(self.steps, run.total_steps, rate, next_evaluation, evaluation_seconds), flush=True)
        self._pace_mark = (self.steps, now, self._evaluation_seconds)

    @property
    def _algorithm(self) -> str:
        """The algorithm's name in reports: its config class's (``sac_glam`` -> ``SAC-GLAM``)."""
        name = type(self.cfg).ALGORITHM
        return name.upper().replace("_", "-") if name else type(self.cfg).__name__.removesuffix("Config")

    @property
    def _rank_prefix(self) -> str:
        """``"rank 2: "`` before a line every rank prints; nothing for a single process."""
        return f"rank {self.rank}: " if self.world > 1 else ""

    def _print(self, line: str) -> None:
        """A line above the progress bar (or plain, without one)."""
        if self.progress is not None and not self.progress.disable:
            self.progress.write(line)
        else:
            print(line, flush=True)

    # ---- the end
    def __enter__(self) -> TrainingRun:
        # library log lines (torchrl's INFO) printed above the progress bar instead of through it
        self._log_redirect = logging_redirect_tqdm([logging.getLogger("torchrl"), logging.getLogger()])
        self._log_redirect.__enter__()
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        self._log_redirect.__exit__(kind, error, traceback)
        if isinstance(error, (NonFiniteLossError, DivergenceError)):  # stop; the last good checkpoint stays
            self.failure = str(error)
            return True
        return False

    def finish(self, updates: str) -> int:
        """The exit code (0 done, 1 a non-finite loss or divergence, :data:`PREEMPTED` stopped with a checkpoint)
        and, on rank 0 of a finished run, the final report (``updates``: e.g. "12 updates")."""
        if self.progress is not None:
            self.progress.close()
        if self.failure is not None:
            print(
                f"stopped: {self.failure}. The last good checkpoint is kept in {self.cfg.run.run_dir}; resume "
                "from it with --resume after changing the settings (e.g. a lower learning rate).",
                file=sys.stderr,
            )
            return 1
        if self.stopped:
            return PREEMPTED
        if self.main_rank and self.logger is not None:
            # a resumed run that had already finished evaluated nothing now: its last evaluations
            final = self.logger.last_evaluation or last_evaluations(self.cfg.run.run_dir)
            print(
                f"done: {self.steps} steps, {updates}, {self.wall_seconds:.0f} s; success "
                + ", ".join(_final_success(k, v, self.cfg.env.name) for k, v in final.items() if k.endswith("/success"))
            )
            report = write_report(
                self.cfg.run.run_dir, self.cfg.to_dict(), algorithm=self._algorithm, preset=self.options.preset
            )
            print(f"logs and checkpoint in {Path(self.cfg.run.run_dir).resolve()}")
            if report:
                print("report: " + ", ".join(str(path) for path in report))
        return 0
