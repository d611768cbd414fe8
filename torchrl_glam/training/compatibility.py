"""What this version does with what earlier versions wrote, in one table (:data:`FORMER_VERSIONS`),
and the words of a refusal (:func:`written_by`): a run dir, a config.json or a checkpoint of an
earlier version is read where it can be, and otherwise refused in one line naming the version that
reads it and the fix, never misread. The places that meet each case (the config, the checkpoint,
the run harness) name its entry here. Imports nothing heavy (the command line checks configs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormerVersion:
    """One thing an earlier version wrote, and what this version does with it.

    Args:
        version (str): the version that wrote it ("0.1.0", "0.2", "0.3.0").
        wrote (str): what it wrote.
        now (str): what this version does with it: refuses it (naming the version) or reads it.
    """

    version: str
    wrote: str
    now: str


#: What earlier versions wrote that this version meets, by name (the places that meet it name it).
FORMER_VERSIONS: dict[str, FormerVersion] = {
    "field_names_0_1": FormerVersion(
        "0.1.0",
        "config fields under names renamed in 0.2.0 (PPO-GLAM's value_coeff, her_loss)",
        "refused, naming the new path (GLAMConfig.FORMER_NAMES)",
    ),
    "checkpoint_layout_0_1": FormerVersion(
        "0.1.0",
        "checkpoints holding HER's and the no-op twins' state at their root (LAYOUT_0_1_ENTRIES)",
        "refused",
    ),
    "config_without_sections_0_2": FormerVersion(
        "0.2", "config.json with every field at its top, without sections", "refused"
    ),
    "checkpoint_digest_0_2": FormerVersion(
        "0.2", "checkpoints whose digest depends on sets' iteration order (DIGEST_0_2_KEY)", "refused"
    ),
    "ratio_without_her_0_3": FormerVersion(
        "0.3.0",
        'SAC-GLAM configs with replay.batch_strategy "ratio" and replay.her false (uniform batches)',
        "read: as the default (unset: uniform without HER)",
    ),
    "her_fields_0_3": FormerVersion(
        "0.3.0",
        "HER's fields in SAC-GLAM's replay and PPO-GLAM's algorithm sections (MOVED_FIELDS)",
        "read: under hindsight",
    ),
    "every_environment_option_0_3": FormerVersion(
        "0.3.0",
        "config.json listing every environment's options (OPTIONS_0_3_DEFAULTS)",
        "read: the options its environment does not declare, at their defaults, are dropped",
    ),
}

#: The fields that moved to another section, by former path -> path now: HER's fields moved from
#: SAC-GLAM's ``replay`` and PPO-GLAM's ``algorithm`` to both configs' ``hindsight`` (0.4.0). A
#: saved config is read with them moved (``GLAMConfig.saved_values``); on a command line the
#: former path is refused naming the new one (the short names, ``her=true``, are unchanged).
MOVED_FIELDS: dict[str, str] = {
    **{
        f"replay.{name}": f"hindsight.{name}"
        for name in (
            "her",
            "her_ratio",
            "her_max_per_episode",
            "her_goals",
            "her_negatives",
            "her_negatives_from",
            "her_twins",
        )
    },
    **{f"algorithm.{name}": f"hindsight.{name}" for name in ("her", "her_filter", "her_centred", "her_ratio")},
}

#: The fix every refusal of an earlier version's run offers.
NEW_RUN = "start a new run with a fresh --run-dir (or --overwrite)"


def written_by(what: str, case: str, detail: str = "") -> str:
    """The refusal of ``what`` (a path, "the saved config"), written by the version of
    :data:`FORMER_VERSIONS` ``[case]``: the version that reads it, and the fix.

    Examples:
        >>> from torchrl_glam.training.compatibility import written_by
        >>> written_by("runs/a/checkpoint.pt", "checkpoint_digest_0_2")  # doctest: +NORMALIZE_WHITESPACE
        'runs/a/checkpoint.pt was written by torchrl_glam 0.2, which this version does not read: resume it
        with torchrl_glam 0.2, or start a new run with a fresh --run-dir (or --overwrite)'
    """
    version = FORMER_VERSIONS[case].version
    detail = f" ({detail})" if detail else ""
    return (
        f"{what} was written by torchrl_glam {version}{detail}, which this version does not read: "
        f"resume it with torchrl_glam {version}, or {NEW_RUN}"
    )


__all__ = ["FORMER_VERSIONS", "MOVED_FIELDS", "NEW_RUN", "FormerVersion", "written_by"]
