"""What a resumed run may change, and how those changes are applied and recorded.

A checkpoint restores the optimisers (their learning rates included), the loss, the replay
contents computed with the saved settings, and the environments mid-episode. A resume that
silently kept some saved values and took some new ones would train a mix that no config
describes, so each field is decided here:

* may change, and is really applied: the run's length and schedule (``total_steps``,
  ``eval_every``, ``log_every``, ``checkpoint_every``), the evaluation sets (``eval_sets``: each
  draws from its own random stream, so adding one leaves the training as it was), ``loggers``,
  ``num_threads``, where the run lives (``run_dir``), and the learning rates (set on the optimisers'
  parameter groups after their
  state is loaded: the way out of a diverging run);
* anything else changed: the resume is refused with each field's saved and new values.

What a resume changed goes to ``run_dir/events.jsonl``; ``config.json`` is rewritten with the
config the run continues with (the saved one plus the allowed changes).
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_glam.training.config import ConfigError, GLAMConfig, config_paths
from torchrl_glam.training.rundir import record_event, truncate_logs

#: Fields a resume may change (see the module docstring), by path; the learning rates by name.
SCHEDULE_FIELDS = (
    "run.total_steps",
    "run.eval_every",
    "run.log_every",
    "run.checkpoint_every",
    "run.eval_sets",
    "run.loggers",
    "run.num_threads",
    "run.run_dir",
)
LEARNING_RATE_FIELDS = ("actor_lr", "critic_lr", "alpha_lr", "lr")


class ResumeError(ValueError):
    """A resume that would change settings a checkpoint fixes."""


def resumable_fields(cfg: GLAMConfig) -> list[str]:
    """The paths of the fields a resume of ``cfg`` may change."""
    rates = [type(cfg).path_of(name) for name in LEARNING_RATE_FIELDS if type(cfg).has_field(name)]
    return [*SCHEDULE_FIELDS, *rates]


def resume_changes(saved: dict[str, Any], cfg: GLAMConfig) -> dict[str, tuple[Any, Any]]:
    """The fields ``cfg`` changes from the checkpoint's config ``saved``: ``{path: (saved, new)}``.

    ``saved`` is a config's ``to_dict()``, or the flat dict of field names that earlier 0.2
    commits wrote. Raises a :class:`ResumeError` naming every changed field a resume may not
    change, and a :class:`~torchrl_glam.training.config.ConfigError` when ``saved`` names a field
    as before 0.2.0."""
    former = [name for name in saved if name in type(cfg).FORMER_NAMES]
    if former:
        raise ConfigError(
            f"the saved config of {cfg.run.run_dir}'s checkpoint names {', '.join(former)}, renamed "
            f"{', '.join(type(cfg).FORMER_NAMES[name] for name in former)} in 0.2.0: it was written by "
            "torchrl_glam 0.1.0; resume it with 0.1.0 or start a new run with a fresh --run-dir"
        )
    saved = config_paths(saved, type(cfg))
    _refuse_another_algorithm(saved, cfg)
    new = cfg.flat_dict()
    # a field missing from an older checkpoint's config had its default then
    default = type(cfg)().flat_dict()
    changes = {
        path: (saved.get(path, default[path]), value)
        for path, value in new.items()
        if saved.get(path, default[path]) != value
    }
    allowed = resumable_fields(cfg)
    refused = {path: values for path, values in changes.items() if path not in allowed}
    if refused:
        listed = "; ".join(f"{path}: saved {old!r}, now {value!r}" for path, (old, value) in refused.items())
        raise ResumeError(
            f"cannot resume {cfg.run.run_dir} with changed settings ({listed}). A resume may change only "
            f"{', '.join(allowed)}: the checkpoint's optimisers, replay and "
            "environments were made with the saved values. To continue the saved run, drop those "
            "overrides; to train with the new values, start a new run with a fresh --run-dir "
            "(without --resume)."
        )
    return changes


def _refuse_another_algorithm(saved: dict[str, Any], cfg: GLAMConfig) -> None:
    """Raises when ``saved`` (a checkpoint's config, by path) is another training script's:
    resuming it would list every field the two configs do not share instead of saying so."""
    from torchrl_glam.training.scripts import SCRIPTS  # filled by torchrl_glam.algorithms, which a script imports

    unknown = sorted(set(saved) - set(type(cfg).field_types()))
    if not unknown:
        return
    for name, script in SCRIPTS.items():
        if script.config_class is type(cfg):
            continue
        if set(saved) <= set(script.config_class.field_types()):
            raise ResumeError(
                f"{cfg.run.run_dir} is a {name.replace('_', '-').upper()} run dir (its checkpoint's config "
                f"has {', '.join(unknown[:4])}{', ...' if len(unknown) > 4 else ''}, which "
                f"{type(cfg).__name__} lacks): resume it with the {name} script (python "
                f"examples/{name}.py --resume, or the launcher's --algorithm {name}), or give this run "
                "another --run-dir."
            )


def apply_resume(
    cfg: GLAMConfig,
    changes: dict[str, tuple[Any, Any]],
    optimizers: dict[str, torch.optim.Optimizer],
    env_steps: int,
    main_rank: bool = True,
) -> None:
    """After the checkpoint's state is loaded: sets the learning rates of ``optimizers`` (config
    field -> the optimiser it drives) to ``cfg``'s, and on the main rank removes the log rows after
    ``env_steps`` and records the resume in ``events.jsonl``."""
    for name, optimizer in optimizers.items():
        for group in optimizer.param_groups:
            group["lr"] = cfg.get(name)
    if not main_rank:
        return
    removed = truncate_logs(cfg.run.run_dir, env_steps)
    record_event(
        cfg.run.run_dir,
        "resume",
        env_steps=env_steps,
        changed={name: {"saved": old, "now": new} for name, (old, new) in changes.items()},
        log_rows_removed=removed,
    )
    for name, (old, new) in changes.items():
        print(f"resume: {name} changed from {old!r} to {new!r}")
