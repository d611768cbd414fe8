"""The command line of a training script, without the heavy imports: :func:`parse_command_line`
(``--preset``, ``--run-dir``, ``--resume``, ``--no-progress`` and typed ``field=value``
overrides), :func:`command_line` (refusals printed without a traceback) and :class:`RunOptions`.

This module imports neither torch, TorchRL nor transformers, and neither do the configs it reads:
``--help`` and the refusals of the parser itself (an unknown field, a value of the wrong type, an
unknown preset) answer before any of them loads. ``--help`` and the refusal of a name that is no
field load the chosen environment's declaration (its options), not the code that builds it.
Validating the parsed config imports the environment it names (a goal set, a range, a device are
checked there), and
a training script imports its agent and the run harness (``run.py``) once its command line is
parsed (tests/training/test_light_command_line.py checks this).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torchrl_glam.training.config import (
    DEFAULT_ENVIRONMENT,
    ConfigError,
    GLAMConfig,
    Presets,
    config_from_preset,
    field_help,
    parse_overrides,
    preset_name,
    preset_overrides,
)
from torchrl_glam.training.config.options import OPTIONS_PATH, OPTIONS_PREFIX, registered_environment
from torchrl_glam.training.config.overrides import environment_named
from torchrl_glam.training.eval_sets import EVAL_SETS, eval_set_title
from torchrl_glam.training.rundir import RunDirError, existing_run_content, started_preset

__all__ = [
    "USAGE_ERROR",
    "USER_ERROR_CLASSES",
    "RunOptions",
    "check_resumed_preset",
    "check_run_dir",
    "command_line",
    "default_run_dir",
    "parse_command_line",
    "resume_command",
    "saved_config",
    "script_command_line",
    "user_errors",
]

#: Refusals whose message says what to do, as (module, class): a script's command line prints them
#: without a traceback. Named, not imported: most of their modules import torch
#: (``run.USER_ERRORS`` holds the classes).
USER_ERROR_CLASSES = (
    ("torchrl_glam.training.config", "ConfigError"),
    ("torchrl_glam.training.rundir", "RunDirError"),
    ("torchrl_glam.training.resume", "ResumeError"),
    ("torchrl_glam.training.checkpoint", "CheckpointError"),
    ("torchrl_glam.modules.loading", "ModelNotFoundError"),
    ("torchrl_glam.modules.loading", "ModelFilesError"),
    ("torchrl_glam.offline.shipped", "ShippedWeightsError"),
    ("torchrl_glam.offline.models", "OfflineModelNotBuilt"),
    ("torchrl_glam.data.replay", "ReplayMemoryError"),
    ("torchrl_glam.envs.registry", "EnvironmentLoadError"),
    ("torchrl_glam.storage", "StorageError"),
    ("torchrl_glam.envs.protocol", "EnvironmentFilesError"),
)
#: The exit code of such a refusal (argparse's for a bad command line).
USAGE_ERROR = 2


def user_errors() -> tuple[type[Exception], ...]:
    """The classes of :data:`USER_ERROR_CLASSES` whose module is imported: an error of a module
    that was never imported cannot have been raised, and importing it to find out would load torch
    for a refusal that needs none."""
    return tuple(
        getattr(sys.modules[module], name) for module, name in USER_ERROR_CLASSES if sys.modules.get(module) is not None
    )


def command_line(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Runs a training script's ``main(argv) -> int`` for a command line (the scripts' ``cli``): a
    refusal of :data:`USER_ERROR_CLASSES` is printed as ``error: <message>`` and exits with
    :data:`USAGE_ERROR`; anything else keeps its traceback. ``main`` itself raises them (callers in
    Python, the launcher's jobs)."""
    try:
        return main(argv)
    except Exception as err:
        stopped = sys.modules.get("torchrl_glam.offline.models")
        if stopped is not None and isinstance(err, stopped.BuildStopped):  # Ctrl-C while building a model
            print(f"stopped: {err}", file=sys.stderr)
            return err.exit_code
        if not isinstance(err, user_errors()):
            raise
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR


def script_command_line(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """A training script's ``cli(argv=None) -> int`` (its console command): :func:`command_line`
    running ``main``."""
    return functools.partial(command_line, main)


def _fields_epilog(config_class: type[GLAMConfig], presets: Presets, preset: str, argv: list[str] | None = None) -> str:
    """The presets with their purposes, and the config fields a command line may set by section,
    with the default preset's values (as its file writes them: neither typed nor validated, which
    would import OmegaConf for a listing), then the options of the environment the preset or the
    command line chooses (its declaration loads, not torch)."""
    shown = {**config_class().flat_dict(), **preset_overrides(presets, preset)}
    help_lines = field_help(config_class)
    installed = installed_environments()
    if installed:  # the environments installed here, whatever package declares them
        help_lines["env.name"] = f"{help_lines.get('env.name', '')}; installed: {', '.join(installed)}"
    short = {path: name for name, path in config_class.short_names().items()}
    lines = ["presets (--preset NAME; the files are in " + str(presets.folder) + "):"]
    lines += [_hanging(f"  {name:<28} ", presets.purpose(name)) for name in presets]
    lines.append(
        _hanging(
            f"  {'FILE.yaml':<28} ",
            "a preset file of your own, or a study's: experiments/<study>/presets/"
            f"{presets.folder.parent.name}/<name>.yaml in the source tree",
        )
    )
    lines.append(f"\nfields (section.field=value, or field=value where unique; the values of --preset {preset}):")
    section = None
    for path, value in shown.items():
        if path == OPTIONS_PATH or path.startswith(OPTIONS_PREFIX):
            continue  # the environment's own, listed after the fields
        if path.rsplit(".", 1)[0] != section:
            section = path.rsplit(".", 1)[0]
            lines.append(f"  [{section}]")
        setting = f"{short.get(path, path)}={value}"
        lines.append(_hanging(f"    {setting:<34} ", help_lines.get(path, "")))
    environment = chosen_environment(presets, preset, _overrides_of(argv))
    lines += _options_listing(environment, shown, short, help_lines.get(OPTIONS_PATH, ""))
    folder = _run_folder(shown["run.run_dir"], preset, shown["run.seed"])
    lines.append(
        "\n"
        + _hanging(
            "",
            f"logs, checkpoints and the report go to {folder} (<run_dir>/<preset>/seed<seed>) "
            "unless --run-dir says otherwise",
        )
    )
    return "\n".join(lines)


def _options_listing(name: str, shown: dict, short: dict, words: str) -> list[str]:
    """``--help``'s lines of the options of the environment ``name``, with the preset's values;
    ``words``: the help line of ``env.options``."""
    try:
        environment = registered_environment(name)
    except ConfigError as error:
        return [f"\nthe options of env={name!r} cannot be listed: {error}"]
    lines = ["\n" + _hanging("", f"options of env={name!r}: {words}")]
    for option in environment.options:
        value = shown.get(OPTIONS_PREFIX + option.name, option.default)
        named = option.name if option.name not in short else OPTIONS_PREFIX + option.name
        lines.append(_hanging(f"    {named + '=' + str(value):<34} ", f"{option.help} ({option.expected()})"))
    if not environment.options:
        lines.append("    (none)")
    return lines


def _overrides_of(argv: list[str] | None) -> list[str]:
    """The ``key=value`` words of a command line."""
    return [word for word in (sys.argv[1:] if argv is None else argv) if "=" in word and not word.startswith("-")]


def chosen_environment(presets: Presets, preset: str, pairs: list[str]) -> str:
    """The environment a command line's ``key=value`` pairs choose (``env=`` or ``env.name=``),
    else its preset's, else the default: the one whose options may be named alone."""
    named = environment_named(dict(pair.split("=", 1) for pair in pairs if "=" in pair))
    if named is not None:
        return named
    try:
        return preset_overrides(presets, preset).get("env.name", DEFAULT_ENVIRONMENT)
    except ConfigError:  # an unknown preset: refused when the config is built
        return DEFAULT_ENVIRONMENT


class _HelpParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose epilog (the presets and every field) is built for ``--help``
    only: it reads every preset file, which a run that is not asking for help does not need."""

    def __init__(self, epilog: Callable[[], str], **kwargs) -> None:
        super().__init__(**kwargs)
        self._make_epilog = epilog

    def format_help(self) -> str:
        if self.epilog is None:
            self.epilog = self._make_epilog()
        return super().format_help()


#: The entry-point group of the environments (``torchrl_glam.envs.registry.ENTRY_POINT_GROUP``; a
#: test checks they agree): read here without importing the environments, for ``--help``
ENVIRONMENTS_GROUP = "torchrl_glam.environments"


def installed_environments() -> list[str]:
    """The names of the environments the installed packages declare (their entry points), sorted;
    importing none of them. Environments a script registers in Python are not among them."""
    from importlib.metadata import entry_points

    return sorted({entry_point.name for entry_point in entry_points(group=ENVIRONMENTS_GROUP)})


@dataclass
class RunOptions:
    """What the command line asks of a run besides its config."""

    preset: str = "cpu"
    resume: bool = False  # continue from run_dir's checkpoint (a fresh start when there is none)
    overwrite: bool = False  # discard what run_dir holds (without it, a used run_dir is refused)
    progress: bool | None = None  # the progress bar (rank 0 only); None: on a terminal only


def default_run_dir(cfg: GLAMConfig, preset: str) -> str:
    """Where a run goes without ``--run-dir``: ``<the config's run_dir>/<preset>/seed<k>``."""
    return _run_folder(cfg.run.run_dir, preset, cfg.run.seed)


def _run_folder(root: str, preset: str, seed: int) -> str:
    return str(Path(root) / preset_name(preset) / f"seed{seed}")


def parse_command_line(
    config_class: type[GLAMConfig],
    presets: Presets,
    argv: list[str] | None = None,
    description: str | None = None,
    default_preset: str = "cpu",
) -> tuple[GLAMConfig, RunOptions]:
    """``[--preset P] [--run-dir D] [--resume | --overwrite] [--no-progress] [field=value ...]``
    -> (config, options).

    The overrides are typed by ``config_class``'s fields and may come before or after the flags.
    ``--help`` and a refusal of the parser (an unknown preset or field, a value of the wrong type)
    exit before anything heavy is imported; the config is then validated against its
    environment's metadata (no torch either).
    """
    parser = _HelpParser(
        lambda: _fields_epilog(config_class, presets, _asked_preset(presets, argv, default_preset), argv),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        default=None,  # under --resume, a preset given is checked against the run's own
        metavar="NAME|FILE.yaml",
        help=f"a preset (listed below; default: {default_preset}) or a YAML file of your own written like "
        "theirs, e.g. 'extends: cpu' and the sections it changes",
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="where logs and checkpoints go (run_dir=...; default: <run_dir>/<preset>/seed<seed>)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from run_dir's checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="discard what run_dir holds and start afresh")
    bar = parser.add_mutually_exclusive_group()
    bar.add_argument("--progress", action="store_true", help="a progress bar even when the output is not a terminal")
    bar.add_argument("--no-progress", action="store_true", help="no progress bar (default: one on a terminal only)")
    parser.add_argument("overrides", nargs="*", help="field=value overrides of the preset")
    args = parser.parse_intermixed_args(argv)
    if args.resume and args.overwrite:
        raise RunDirError("--resume and --overwrite contradict each other: choose one")
    preset = args.preset or default_preset
    overrides = parse_overrides(args.overrides, config_class, chosen_environment(presets, preset, args.overrides))
    if args.run_dir is not None:
        overrides["run.run_dir"] = args.run_dir
    cfg = config_from_preset(config_class, presets, preset, overrides)
    if "run.run_dir" not in overrides:  # one folder per preset and seed, never shared by two presets
        cfg = cfg.replace(run_dir=default_run_dir(cfg, preset))
    check_run_dir(cfg.run.run_dir)
    if args.resume:  # a resume continues the saved run: only the overrides given now change it
        run_dir = Path(cfg.run.run_dir)
        saved = saved_config(config_class, run_dir)
        if saved is not None:
            if args.preset is not None:
                check_resumed_preset(config_class, presets, args.preset, overrides, run_dir)
            preset = started_preset(run_dir) or preset  # what its report and its resume command name
            cfg = saved.replace({**overrides, "run.run_dir": cfg.run.run_dir}).validate()
        elif unreadable_json(run_dir / "config.json"):
            raise RunDirError(
                f"{run_dir / 'config.json'} is unreadable (not JSON), so --resume "
                "cannot tell the settings the run started with: put back that run's config.json, or start a new "
                "run with a fresh --run-dir"
            )
        elif not existing_run_content(run_dir):
            print(f"--resume: {run_dir} holds no run yet, so this starts a fresh run there")
    return cfg, RunOptions(
        preset=preset,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=True if args.progress else False if args.no_progress else None,
    )


def check_resumed_preset(
    config_class: type[GLAMConfig], presets: Presets, preset: str, overrides: dict, run_dir: str | Path
) -> None:
    """Refuses to resume ``run_dir`` with ``--preset preset`` when the run was started with another
    preset whose settings differ (beyond what a resume may change): a resume continues the saved
    config, so the preset given would be ignored while the command and the launcher's record name it."""
    started = started_preset(run_dir)
    if started is None or preset_name(started) == preset_name(preset):
        return  # the same preset (a run from before presets were recorded: its config.json decides)
    resumable = set(config_class.resumable_fields())
    ours = config_from_preset(config_class, presets, preset, overrides).flat_dict()
    try:
        theirs = config_from_preset(config_class, presets, started, overrides).flat_dict()
    except ConfigError:  # its preset file is gone: the names alone differ
        theirs = None
    paths = list(dict.fromkeys([*ours, *(theirs or {})]))  # two environments have different options
    differ = (
        [path for path in paths if path not in resumable and theirs.get(path) != ours.get(path)]
        if theirs is not None
        else ["the preset itself"]
    )
    if differ:
        shown = (
            "; ".join(
                f"{path}: {started} {theirs.get(path)!r}, {preset} {ours.get(path)!r}" for path in differ[:5] if theirs
            )
            or f"{started!r} cannot be read any more"
        )
        more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
        raise ConfigError(
            f"{run_dir} holds a run started with --preset {started}, and --preset {preset} sets other values "
            f"({shown}{more}). A resume continues the saved run, so {preset}'s settings would be ignored: resume "
            f"it with --preset {started} (or without --preset), or start the {preset} run in another "
            "--run-dir (the launcher: another --name or --runs-root)."
        )


#: The longest name of one path component on Linux and macOS file systems (bytes).
NAME_MAX = 255


def check_run_dir(run_dir: str, flag: str = "--run-dir") -> None:
    """Refuses, before anything loads, a run dir that cannot be one: a file, a folder below a file,
    one that cannot be written, a name too long (an empty one is refused by the config's
    validation). ``flag``: the option that named it, for the message."""
    path = Path(run_dir)
    for part in path.parts:
        if len(part.encode()) > NAME_MAX:
            raise RunDirError(
                f"{flag} has a folder name of {len(part.encode())} bytes ({part[:40]}...): file systems allow "
                f"{NAME_MAX}; choose a shorter name"
            )
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{flag} {run_dir} is an existing file, not a folder: choose a folder's path")
    # the nearest part of the path that exists: the run creates the folders below it
    existing = next((p for p in path.absolute().parents if p.exists()), None) if not path.exists() else path
    if existing is not None and not existing.is_dir():
        raise RunDirError(f"{flag} {run_dir} lies below {existing}, which is a file: choose a path of folders")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise RunDirError(
            f"{flag} {run_dir}: {existing} is not writable by this user, and a run writes its logs and checkpoints "
            "there: make it writable, or choose another path"
        )


def resume_command(preset: str, run_dir: str | Path) -> str:
    """The command that continues the run in ``run_dir``: this process's script (``python
    examples/sac_glam.py``, or an installed command such as ``sac-glam``) with ``--preset``,
    ``--run-dir`` and ``--resume`` (a resume reads the rest from the run's ``config.json``)."""
    script = sys.argv[0] if sys.argv and sys.argv[0] else "sac-glam"
    program = ["python", script] if script.endswith(".py") else [Path(script).name]
    return shlex.join([*program, "--preset", preset, "--run-dir", str(run_dir), "--resume"])


def _asked_preset(presets: Presets, argv: list[str] | None, default_preset: str) -> str:
    """The preset ``--preset`` names (``--help`` lists its values and folder), or the default where
    none is given or it is not one (the parser then refuses it, naming the presets)."""
    finder = argparse.ArgumentParser(add_help=False)
    finder.add_argument("--preset", default=default_preset)
    preset = finder.parse_known_args(argv)[0].preset
    try:
        preset_overrides(presets, preset)
    except ConfigError:
        return default_preset
    return preset


def unreadable_json(path: Path) -> bool:
    """Whether ``path`` exists but holds no JSON (garbage, a torn write)."""
    try:
        json.loads(path.read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    return False


def saved_config(config_class: type[GLAMConfig], run_dir: Path) -> GLAMConfig | None:
    """The config a run dir's ``config.json`` holds, or ``None`` when it has none or holds another
    algorithm's (the resume's refusal then names it). Raises a :class:`ConfigError` when it names
    an environment that is not installed here, or fails to load (nothing could resume it)."""
    try:
        values = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):  # no file, torn JSON
        return None
    try:
        return config_class.from_dict(values)
    except (ValueError, TypeError):  # another config class (ConfigError), or its environment is gone
        _refuse_missing_environment(values, run_dir)
        return None


def _refuse_missing_environment(values: object, run_dir: Path) -> None:
    """Raises a :class:`ConfigError` when a saved config names an environment that is not
    registered here, or fails to load: the preset's environment would otherwise stand in for it,
    and the resume be refused as a change of ``env.name`` that no override asked for."""
    env = values.get("env") if isinstance(values, dict) else None
    name = env.get("name") if isinstance(env, dict) else None
    if not isinstance(name, str):
        return
    from torchrl_glam.envs.registry import ENTRY_POINT_GROUP, environment_names, get_environment

    if name not in environment_names():
        raise ConfigError(
            f"{run_dir} holds a run on the environment {name!r}, which is not installed here (registered: "
            f"{', '.join(environment_names())}): install the package that provides it (its entry point in the "
            f"group {ENTRY_POINT_GROUP}), or register it with register_environment before main, then --resume again"
        )
    try:
        get_environment(name)
    except (ValueError, ImportError) as error:  # EnvironmentLoadError: the module or factory fails
        raise ConfigError(
            f"{run_dir} holds a run on the environment {name!r}, which fails to load here: {error}"
        ) from None


#: the width of --help's listing
HELP_WIDTH = 100


def _hanging(head: str, text: str) -> str:
    """``head`` then ``text`` wrapped at :data:`HELP_WIDTH`, its further lines under its first
    (whole sentences: a help line cut at a width left them unfinished)."""
    if not text:
        return head.rstrip()
    indent = " " * len(head) if len(head) < HELP_WIDTH // 2 else " " * 8
    return textwrap.fill(text, HELP_WIDTH, initial_indent=head, subsequent_indent=indent, break_on_hyphens=False)


def _final_success(key: str, value: float, environment: str | None = None) -> str:
    """``"held_out/success"`` -> ``"held_out 0.05 (held-out goals (never trained on), greedy)"``, in
    the words of a run on ``environment`` (:func:`~torchrl_glam.training.eval_sets.eval_set_title`)."""
    name = key.split("/")[0]
    eval_set = EVAL_SETS.get(name)
    title = eval_set_title(name, environment)
    meaning = f" ({title}{', greedy' if eval_set.greedy else ''})" if eval_set else ""  # sampled: in the title
    return f"{name} {value:.2f}{meaning}"
