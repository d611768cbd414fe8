"""The library's algorithms, one folder each: its config and presets (``config.py``, whose config
class also declares what the run harness needs of it: learning rates, per-rank fields, discount,
divergence metrics), what its script builds from the config (``build.py``: the networks and the
loss, passed each argument by name; replay...), its update (``update.py``) and its training script
(``train.py``, the loop that reads like the paper's algorithm). The losses themselves are TorchRL
``LossModule`` classes in :mod:`torchrl_glam.objectives`.

* :mod:`~torchrl_glam.algorithms.sac_glam`: SAC-GLAM (Gaven et al. 2024), with HER;
* :mod:`~torchrl_glam.algorithms.ppo_glam`: PPO-GLAM (GLAM, Carta et al. 2023);
* :mod:`~torchrl_glam.algorithms.grpo_glam`: GRPO-GLAM (GRPO, Shao et al. 2024; GiGPO, Feng et al. 2025).

:data:`SCRIPTS` is the table of their training scripts, by algorithm name (the launcher's
``--algorithm``); it imports the configs only, so the command line stays light. A package adds an
algorithm through the entry-point group ``torchrl_glam.algorithms``, its value the
``module:attribute`` of a :class:`~torchrl_glam.algorithms.scripts.TrainingScript` (imported when
the algorithm is first named)::

    # pyproject.toml of the package that holds my_package/train.py
    [project.entry-points."torchrl_glam.algorithms"]
    my_algorithm = "my_package.script:SCRIPT"
"""

from importlib.metadata import entry_points

from torchrl_glam.algorithms.grpo_glam.config import GRPO_PRESETS, GRPOGLAMConfig
from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOGLAMConfig
from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
from torchrl_glam.algorithms.scripts import TrainingScript

#: The entry-point group of the algorithms of other packages
ENTRY_POINT_GROUP = "torchrl_glam.algorithms"

#: The library's training scripts, by algorithm name (each config class's ``ALGORITHM``).
SCRIPTS: dict[str, TrainingScript] = {
    SACGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.sac_glam.train", SACGLAMConfig, PRESETS),
    PPOGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.ppo_glam.train", PPOGLAMConfig, PPO_PRESETS),
    GRPOGLAMConfig.ALGORITHM: TrainingScript("torchrl_glam.algorithms.grpo_glam.train", GRPOGLAMConfig, GRPO_PRESETS),
}


def algorithm_names() -> list[str]:
    """The algorithms the launcher accepts: the library's and those of the installed packages'
    entry points (none of them imported)."""
    return sorted(set(SCRIPTS) | {entry_point.name for entry_point in entry_points(group=ENTRY_POINT_GROUP)})


def get_script(name: str) -> TrainingScript:
    """The training script of the algorithm ``name``: the library's (:data:`SCRIPTS`), or the
    :class:`~torchrl_glam.algorithms.scripts.TrainingScript` a package declares under that name in
    the entry-point group ``torchrl_glam.algorithms``."""
    declared = [entry_point for entry_point in entry_points(group=ENTRY_POINT_GROUP) if entry_point.name == name]
    if name in SCRIPTS:
        if declared:  # a package's algorithm never silently loses to, or replaces, the library's
            raise ValueError(
                f"algorithm {name!r} is the library's; the entry point {declared[0].value!r} of the group "
                f"{ENTRY_POINT_GROUP!r} must take another name"
            )
        return SCRIPTS[name]
    if not declared:
        raise ValueError(f"unknown algorithm {name!r}: known are {algorithm_names()}")
    if len({entry_point.value for entry_point in declared}) > 1:
        values = sorted({entry_point.value for entry_point in declared})
        raise ValueError(f"algorithm {name!r} is declared by more than one package ({values}): uninstall all but one")
    entry_point = declared[0]
    where = f"algorithm {name!r} (entry point {entry_point.value!r} of the group {ENTRY_POINT_GROUP!r})"
    try:
        script = entry_point.load()
    except Exception as err:  # the package's own code: any error, reported in one line
        raise ValueError(f"{where} cannot be loaded: {type(err).__name__}: {err}") from None
    if not isinstance(script, TrainingScript):
        raise ValueError(
            f"{where} is a {type(script).__name__}, not a TrainingScript: point it at "
            "TrainingScript(module, config_class, presets)"
        )
    if script.config_class.ALGORITHM != name:
        raise ValueError(
            f"{where}: its config class {script.config_class.__name__} names the algorithm "
            f"{script.config_class.ALGORITHM!r}; the entry point's name and ALGORITHM must agree"
        )
    return script


__all__ = ["ENTRY_POINT_GROUP", "SCRIPTS", "TrainingScript", "algorithm_names", "get_script"]
