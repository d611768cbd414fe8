"""What a resumed run may change, and how those changes are applied and recorded.

A checkpoint restores the optimisers (their learning rates included), the loss, the replay
contents computed with the saved settings, and the environments mid-episode. A resume that
silently kept some saved values and took some new ones would train a mix that no config
describes, so each field is decided here:

* may change, and is really applied: the run's length and schedule (``total_steps``,
  ``eval_every``, ``log_every``, ``checkpoint_every``), the evaluation sets (``eval_sets``: each
  draws from its own random stream, so adding one leaves the training as it was), ``loggers``,
  ``num_threads``, where the run lives (``run_dir``), and the learning rates the config class
  declares (``LEARNING_RATE_FIELDS``: set on the optimisers' parameter groups after their state is
  loaded, the way out of a diverging run; a rate that is ``None``, an optimiser that does not
  exist, stays so) and their schedule's fields (``LEARNING_RATE_SCHEDULE_FIELDS``);
* anything else changed: the resume is refused with each field's saved and new values.

What a resume changed goes to ``run_dir/events.jsonl``; ``config.json`` is rewritten with the
config the run continues with (the saved one plus the allowed changes).
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_glam.training.compatibility import written_by
from torchrl_glam.training.config import ConfigError, GLAMConfig, config_paths
from torchrl_glam.training.rundir import record_event, truncate_logs


class ResumeError(ValueError):
    """A resume that would change settings a checkpoint fixes."""


def resumable_fields(cfg: GLAMConfig) -> list[str]:
    """The paths of the fields a resume of ``cfg`` may change (its config class declares them)."""
    return type(cfg).resumable_fields()


def resume_changes(
    saved: dict[str, Any], cfg: GLAMConfig, saved_algorithm: str | None = None
) -> dict[str, tuple[Any, Any]]:
    """The fields ``cfg`` changes from the checkpoint's config ``saved``: ``{path: (saved, new)}``.
    ``saved_algorithm``: the algorithm the checkpoint names (``None`` in older ones).

    ``saved`` is a config's ``to_dict()``. Raises a :class:`ResumeError` naming every changed field
    a resume may not change, and a :class:`~torchrl_glam.training.config.ConfigError` when ``saved``
    names a field as before 0.2.0 or has no sections (torchrl_glam 0.2's)."""
    former = [name for name in saved if name in type(cfg).FORMER_NAMES]
    if former:
        renamed = ", ".join(type(cfg).FORMER_NAMES[name] for name in former)
        raise ConfigError(
            written_by(
                f"the saved config of {cfg.run.run_dir}'s checkpoint",
                "field_names_0_1",
                f"it names {', '.join(former)}, renamed {renamed} in 0.2.0",
            )
        )
    _refuse_another_algorithm(saved_algorithm, cfg)
    saved = config_paths(saved, type(cfg))
    new = cfg.flat_dict()
    # a field missing from an older checkpoint's config had its default then
    default = type(cfg)().flat_dict()
    changes = {
        path: (saved.get(path, default.get(path)), value)
        for path, value in new.items()
        if saved.get(path, default.get(path)) != value
    }
    allowed = resumable_fields(cfg)
    # a rate from or to None adds or removes an optimiser, whose state the checkpoint has or lacks
    rates = type(cfg).LEARNING_RATE_FIELDS
    refused = {
        path: values for path, values in changes.items() if path not in allowed or (path in rates and None in values)
    }
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


def _refuse_another_algorithm(saved_algorithm: str | None, cfg: GLAMConfig) -> None:
    """Raises when the checkpoint is another training script's: resuming it would list every
    field the two configs do not share instead of saying so."""
    ours = type(cfg).ALGORITHM
    if saved_algorithm is None or saved_algorithm == ours:
        return
    raise ResumeError(
        f"{cfg.run.run_dir} is a {saved_algorithm.replace('_', '-').upper()} run dir (its checkpoint names "
        f"{saved_algorithm!r}, this script trains {ours!r}): resume it with the {saved_algorithm} script "
        f"(python examples/{saved_algorithm}.py --resume, or the launcher's --algorithm {saved_algorithm}), "
        "or give this run another --run-dir."
    )


def apply_resume(
    cfg: GLAMConfig,
    changes: dict[str, tuple[Any, Any]],
    optimizers: dict[str, torch.optim.Optimizer],
    env_steps: int,
    main_rank: bool = True,
) -> None:
    """After the checkpoint's state is loaded: sets the learning rates of ``optimizers`` (a field
    of the config class's ``LEARNING_RATE_FIELDS`` -> the optimiser it drives) to ``cfg``'s, and
    on the main rank removes the log rows after
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
