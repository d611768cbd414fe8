"""What a SAC-GLAM or PPO-GLAM run logs, through TorchRL's loggers (CSV always; TensorBoard, W&B if
asked for and installed), against environment steps, with the wall seconds logged beside every flush.

Scalars: ``train/success`` and ``train/success/<goal type>`` (episodes finished since the last
flush), ``train/episode_length``, and shares of their steps: ``train/repeat_go_to_share`` ("Go to"
the object the agent already stands on), ``train/no_op_share`` (steps that leave the state as it
was), ``train/action_share/<go_to|grasp|release>``; the update's metrics (means since the last
flush), ``time/wall_seconds``, ``time/steps_per_second``, and
``eval/<evaluation set>/success[/<goal type>]`` (the config's ``eval_sets``).

* SAC-GLAM: the losses, ``alpha``, ``entropy``, ``q_value``, ``replay/relabeled_share`` (of the
  buffer), ``batch/relabeled_share``, ``batch/age`` (environment steps since the sampled
  transitions were collected);
* PPO-GLAM: the losses, ``entropy``, ``clip_fraction`` or ``kl`` and ``kl_coeff``, ``kl_approx``,
  ``ratio``, ``ratio/first_epoch`` (with HER also ``_collected`` and ``_relabeled``),
  ``grad_norm``, ``update/transitions``, ``update/relabeled_share``;
* an autotelic agent: ``autotelic/...`` (goal memory growth, discovered share of the training
  goals, choice shares), and ``autotelic.jsonl`` (LP and choices per group of goals).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections import defaultdict
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torchrl.record.loggers import CSVLogger, Logger

from torchrl_glam.data.episodes import episode_success
from torchrl_glam.storage import make_folder, storage_error
from torchrl_glam.training.config import GLAMConfig
from torchrl_glam.training.rundir import CREATED_FOLDER, LIBRARY_FOLDER, append_line, record_written, write_atomic


def make_loggers(cfg: GLAMConfig) -> list[Logger]:
    """TorchRL loggers writing under ``run_dir``; optional backends only when installed."""
    run_dir = Path(cfg.run.run_dir)
    loggers: list[Logger] = [CSVLogger(exp_name="logs", log_dir=str(run_dir))]
    wanted = [name for name in cfg.run.loggers if name != "csv"]
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        warnings.warn(
            f"no {' or '.join(missing)} logs: {' and '.join(missing)} not installed (pip install "
            f"{' '.join(missing)}; or loggers=csv to ask only for the CSV logs)",
            stacklevel=2,
        )
    if "tensorboard" in wanted and "tensorboard" not in missing:
        from torchrl.record.loggers import TensorboardLogger

        loggers.append(TensorboardLogger(exp_name="tensorboard", log_dir=str(run_dir)))
    if "wandb" in wanted and "wandb" not in missing:
        from torchrl.record.loggers import WandbLogger

        loggers.append(WandbLogger(exp_name=run_dir.name, save_dir=str(run_dir), config=cfg.to_dict()))
    return loggers


def read_evaluations(run_dir: str | Path) -> dict[str, list[dict]]:
    """``run_dir/evaluations.jsonl`` by evaluation set, each set's records in file (step) order;
    torn lines are skipped."""
    path, curves = Path(run_dir) / "evaluations.jsonl", {}
    if not path.exists():
        return curves
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
            name = record["set"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        curves.setdefault(name, []).append(record)
    return curves


#: a few episodes of the final evaluation as text, per evaluation set (in the CSV logger's texts/)
FINAL_EPISODES = Path("logs") / "texts" / "final_episodes.json"


def read_final_episodes(run_dir: str | Path) -> dict[str, list[dict]]:
    """``{set: [episode, ...]}`` of ``run_dir``'s final evaluation; empty when there are none."""
    try:
        episodes = json.loads((Path(run_dir) / FINAL_EPISODES).read_text())
    except (OSError, ValueError):
        return {}
    return episodes if isinstance(episodes, dict) else {}


def last_evaluations(run_dir: str | Path) -> dict[str, float]:
    """The last evaluation of each set in ``run_dir/evaluations.jsonl``, as ``{"<set>/<metric>": value}``
    (``RunLogger.last_evaluation``'s form); torn lines are skipped."""
    last = {}
    for name, records in read_evaluations(run_dir).items():
        for record in records:
            last.update(
                {
                    f"{name}/{key}": value
                    for key, value in record.items()
                    if key not in ("set", "env_steps", "wall_seconds") and isinstance(value, (int, float))
                }
            )
    return last


class RunLogger:
    """Accumulates episode and update statistics and writes their means at each flush."""

    def __init__(self, cfg: GLAMConfig) -> None:
        self.run_dir = run_dir = Path(cfg.run.run_dir)
        make_folder(run_dir)
        write_atomic(run_dir / "config.json", cfg.to_json())  # a kill never leaves half of it
        fresh = {name: not (run_dir / name).exists() for name in ("logs", "tensorboard", "wandb")}
        self.loggers = make_loggers(cfg)
        # TorchRL's loggers write their own files: the CSV logger's are recorded as they are logged
        # (self._log), the folders it creates now; TensorBoard's and W&B's folders whole
        if fresh["logs"]:
            for folder in ("logs", "logs/scalars", "logs/texts", "logs/videos"):
                if (run_dir / folder).is_dir():
                    record_written(run_dir / folder, CREATED_FOLDER)
        for name in ("tensorboard", "wandb"):
            if fresh[name] and (run_dir / name).is_dir():
                record_written(run_dir / name, LIBRARY_FOLDER)
        self._recorded_scalars: set[str] = set()
        self.environment = cfg.environment
        self.catalogue = self.environment.catalogue
        self._sums: dict[str, float] = defaultdict(float)
        self._counts: dict[str, int] = defaultdict(int)
        self._last_flush: tuple[int, float] | None = None
        self.last_evaluation: dict[str, float] = {}
        self._replay_share: float | None = None  # SAC-GLAM's replay only
        self._goals_logged: torch.Tensor | None = None  # autotelic: the goals autotelic.jsonl has listed

    def state_dict(self) -> dict:
        """What the next flush still needs (means since the last flush, its step and time): in the
        checkpoint, so that a resumed run writes the rows an uninterrupted one writes."""
        return {
            "sums": dict(self._sums),
            "counts": dict(self._counts),
            "last_flush": self._last_flush,
            "replay_share": self._replay_share,
            "goals_logged": self._goals_logged,
        }

    def load_state_dict(self, state: dict) -> None:
        self._sums = defaultdict(float, state["sums"])
        self._counts = defaultdict(int, state["counts"])
        self._last_flush = tuple(state["last_flush"]) if state["last_flush"] is not None else None
        self._replay_share, self._goals_logged = state["replay_share"], state["goals_logged"]

    def _add(self, name: str, value: float, count: int = 1) -> None:
        self._sums[name] += value
        self._counts[name] += count

    def _log(self, name: str, value: float, step: int) -> None:
        for logger in self.loggers:
            try:
                logger.log_scalar(name, value, step=step)
            except OSError as error:  # TorchRL's loggers name no file: a full disk, a folder made read-only
                raise storage_error(error, self.run_dir / "logs", "then continue with --resume") from None
        if name not in self._recorded_scalars:  # the file TorchRL's CSV logger writes for it
            self._recorded_scalars.add(name)
            record_written(self.run_dir / "logs" / "scalars" / f"{name}.csv")

    def episodes(self, episodes: TensorDictBase) -> None:
        """Success and length of finished episodes (before relabeling)."""
        success = episode_success(episodes).float()
        length = episodes["mask"].sum(-1).float()
        types = torch.as_tensor(self.catalogue.goal_type[episodes["goal_id"][:, 0].cpu().numpy()])
        self._add("train/success", success.sum().item(), len(success))
        self._add("train/episode_length", length.sum().item(), len(length))
        for name, (total, count) in self.environment.episode_metrics(episodes).items():
            self._add(f"train/{name}", total, count)
        for k, name in enumerate(self.environment.goal_types):
            chosen = types == k
            if chosen.any():
                self._add(f"train/success/{name}", success[chosen].sum().item(), int(chosen.sum()))

    def update(self, metrics: dict[str, float], env_steps: int, replay=None) -> None:
        for name, value in metrics.items():
            if name == "batch_collected_at":
                self._add("batch/age", env_steps - value)
            elif name == "batch_relabeled":
                self._add("batch/relabeled_share", value)
            else:
                self._add(name, value)
        if replay is not None:
            sizes = replay.sizes()
            self._replay_share = sizes.get("relabeled", 0) / max(sum(sizes.values()), 1)

    def flush(self, env_steps: int, wall_seconds: float) -> None:
        for name, total in self._sums.items():
            self._log(name, total / max(self._counts[name], 1), env_steps)
        self._sums.clear()
        self._counts.clear()
        if self._replay_share is not None:
            self._log("replay/relabeled_share", self._replay_share, env_steps)
        self._log("time/wall_seconds", wall_seconds, env_steps)
        if self._last_flush is not None:
            steps, seconds = env_steps - self._last_flush[0], wall_seconds - self._last_flush[1]
            self._log("time/steps_per_second", steps / max(seconds, 1e-9), env_steps)
        self._last_flush = (env_steps, wall_seconds)

    def autotelic(self, goals, env_steps: int, max_groups: int = 100) -> None:
        """An autotelic agent's goal memory and choices (``AutotelicGoals``): its scalars, and one
        line of ``autotelic.jsonl`` per call with the goals discovered since the previous line and
        the step each was first reported at (``new``: {goal: step}; after a resume, the first line
        lists the whole memory), so the discovery curve is exact at every step whatever
        ``log_every``, and the LP statistics and choices of the groups (the ``max_groups`` of
        highest LP: per-goal groups on the full task set would write megabytes)."""
        metrics = goals.metrics()
        for name, value in metrics.items():
            self._log(name, value, env_steps)
        table = goals.group_table()
        shown = sorted(table, key=lambda g: -table[g]["lp"])[:max_groups]
        known, first_seen = goals.memory.known, goals.memory.first_seen
        new = known if self._goals_logged is None else known & ~self._goals_logged
        self._goals_logged = known.clone()
        new_ids = torch.nonzero(new).squeeze(-1)
        new_ids = new_ids[torch.argsort(first_seen[new_ids], stable=True)].tolist()
        line = {
            "env_steps": env_steps,
            "discovered": len(goals.memory),
            "discovered_train_fraction": metrics["autotelic/discovered_train_fraction"],
            "new": {goals.catalogue.goals[i]: int(first_seen[i]) for i in new_ids},
            "groups_with_goals": len(table),
            "groups": {g: table[g] for g in sorted(shown)},
        }
        append_line(self.run_dir / "autotelic.jsonl", json.dumps(line) + "\n")
        goals.reset_choice_counts()

    def final_episodes(self, name: str, episodes: list[dict]) -> None:
        """A few episodes of the final evaluation of set ``name`` as text (``evaluation.Transcripts``),
        into ``logs/texts/final_episodes.json`` (one entry per set), which the report renders."""
        path = self.run_dir / FINAL_EPISODES
        path.parent.mkdir(parents=True, exist_ok=True)
        written = read_final_episodes(self.run_dir)
        write_atomic(path, json.dumps({**written, name: episodes}, indent=1) + "\n")

    def evaluation(self, name: str, results: dict[str, float], env_steps: int, wall_seconds: float) -> None:
        for key, value in results.items():
            self._log(f"eval/{name}/{key}", value, env_steps)
            self.last_evaluation[f"{name}/{key}"] = value
        self._log("time/wall_seconds", wall_seconds, env_steps)
        append_line(
            self.run_dir / "evaluations.jsonl",
            json.dumps({"env_steps": env_steps, "wall_seconds": wall_seconds, "set": name, **results}) + "\n",
        )
