"""A run's report, written into its folder when it ends: ``report.png`` (greedy success against
environment steps and against wall-clock seconds, one line per evaluation set) and ``report.md``
(what ran, each set's last and best success, what each set measures).

The picture needs matplotlib (``pip install "torchrl_glam[plots]"``); without it only the summary is
written, and the run says so in one line.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from torchrl_glam.training.config import flatten_sections
from torchrl_glam.training.eval_sets import EVAL_SETS, eval_set_title
from torchrl_glam.training.logging import FINAL_EPISODES, read_evaluations, read_final_episodes
from torchrl_glam.training.provenance import ENVIRONMENT_NAME, environment_summary, read_environment
from torchrl_glam.training.rundir import write_atomic

logger = logging.getLogger(__name__)

PICTURE_NAME = "report.png"
SUMMARY_NAME = "report.md"


def write_report(
    run_dir: str | Path, config: dict, algorithm: str | None = None, preset: str | None = None
) -> list[Path]:
    """Writes the report of the run in ``run_dir`` (``config``: its config as a dict; ``algorithm``
    and ``preset``: their names, in the titles); returns the files written (none when the run
    evaluated nothing)."""
    run_dir = Path(run_dir)
    names = (algorithm, preset)
    curves = read_evaluations(run_dir)
    if not curves:
        return []
    written = [_write_summary(run_dir / SUMMARY_NAME, curves, config, names)]
    try:
        import matplotlib
    except ImportError:
        logger.warning('no %s: matplotlib is not installed (pip install "torchrl_glam[plots]")', PICTURE_NAME)
        return written
    matplotlib.use("Agg")  # files only: no display needed
    written.append(_write_picture(run_dir / PICTURE_NAME, curves, config, names))
    return written


def _title(config: dict, names: tuple[str | None, str | None] = (None, None)) -> str:
    algorithm, preset = names
    values = flatten_sections(config)
    model = values.get("model.name") or "tiny T5 (random init)"
    her = any(path.rsplit(".", 1)[-1] == "her" and value is True for path, value in values.items())
    named = (f"{algorithm}{'+HER' if her else ''}" if algorithm else "") + (f", preset {preset}" if preset else "")
    return (f"{named}: " if named else "") + (
        f"{values.get('env.name')}, goals {values.get('env.goals')}, {model}, seed {values.get('run.seed')}"
    )


def _evaluation_note(config: dict, sets) -> str:
    """How each point was measured: which policy, over how many episodes."""
    episodes = flatten_sections(config).get("run.eval_episodes")
    sampled = [name for name in sets if name in EVAL_SETS and not EVAL_SETS[name].greedy]
    policy = "the greedy policy (its most probable action)" + (
        f"; {', '.join(sampled)}: the sampled policy" if sampled else ""
    )
    return f"each point: {policy}, over {episodes} fixed episodes per evaluation set"


def _write_picture(path: Path, curves: dict[str, list[dict]], config: dict, names=(None, None)) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for name, rows in curves.items():
        label = eval_set_title(name, flatten_sections(config).get("env.name"))
        success = [r["success"] for r in rows]
        axes[0].plot([r["env_steps"] for r in rows], success, marker=".", label=label)
        axes[1].plot([r["wall_seconds"] / 60 for r in rows], success, marker=".", label=label)
    axes[0].set_xlabel("environment steps")
    axes[1].set_xlabel("wall-clock minutes")
    axes[0].set_ylabel("success rate")
    axes[0].set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.grid(alpha=0.3)
    # below the axes: inside them it covered a curve
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=max(len(labels), 1), fontsize="small", frameon=False)
    fig.suptitle(_title(config, names) + "\n" + _evaluation_note(config, curves), fontsize="medium")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    picture = io.BytesIO()
    fig.savefig(picture, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, picture.getvalue())
    return path


def _write_summary(path: Path, curves: dict[str, list[dict]], config: dict, names=(None, None)) -> Path:
    last_rows = [rows[-1] for rows in curves.values()]
    steps = max(r["env_steps"] for r in last_rows)
    minutes = max(r["wall_seconds"] for r in last_rows) / 60
    lines = [
        f"# Run report: {_title(config, names)}",
        "",
        f"{steps} environment steps in {minutes:.1f} min; the config is `config.json`, every evaluation "
        "`evaluations.jsonl`, the curves `report.png`.",
        "",
        _evaluation_note(config, curves)[0].upper() + _evaluation_note(config, curves)[1:] + ".",
        "",
        *_environment_lines(path.parent),
        "| evaluation set | what it measures | last success | best success (at step) |",
        "| --- | --- | --- | --- |",
    ]
    for name, rows in curves.items():
        best = max(rows, key=lambda r: r["success"])
        meaning = eval_set_title(name, flatten_sections(config).get("env.name")) if name in EVAL_SETS else ""
        lines.append(
            f"| {name} | {meaning} | {rows[-1]['success']:.2f} | {best['success']:.2f} ({best['env_steps']}) |"
        )
    lines += _episode_lines(path.parent)
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def _environment_lines(run_dir: Path) -> list[str]:
    """What the run ran on (``environment.json``): bitwise reproducible only on the same."""
    record = read_environment(run_dir)
    if record is None:
        return []
    return [f"Ran on: {environment_summary(record)} (`{ENVIRONMENT_NAME}`).", ""]


#: steps of an episode shown in the report (the rest are in the file)
SHOWN_STEPS = 12


def _repeats(steps: list[dict]) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive steps that are the same step (what the agent
    saw, its candidates, what it took, the reward, the reports): a looping episode's."""
    runs: list[tuple[int, int]] = []
    for t, step in enumerate(steps):
        if runs and steps[runs[-1][0]] == step:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def _episode_lines(run_dir: Path) -> list[str]:
    """A few episodes of the final evaluation of each set as transcripts: what the agent does."""
    final = read_final_episodes(run_dir)
    if not final:
        return []
    lines = ["", "## A few episodes of the final evaluation", "", f"All their steps: `{FINAL_EPISODES}`."]
    for name, episodes in final.items():
        policy = "greedy" if name not in EVAL_SETS or EVAL_SETS[name].greedy else "sampled"
        for k, episode in enumerate(episodes, 1):
            steps = episode["steps"]
            ending = f"succeeded in {len(steps)} steps" if episode["success"] else f"failed ({len(steps)} steps)"
            lines += ["", f"### {name}, episode {k} ({policy}): {episode['goal']}: {ending}"]
            for first, last in _repeats(steps[:SHOWN_STEPS]):
                step = steps[first]
                lines += ["", f"**Step {first + 1}.** The agent saw:", "", "```text", step["saw"].rstrip(), "```", ""]
                candidates = step.get("candidates")
                top = ", ".join(f"`{text}` {prob:.2f}" for text, prob in candidates or [])
                reported = ", ".join(step["reported"]) or "nothing"
                lines.append(
                    (f"Its top candidates: {top}. " if top else "")
                    + f"It took `{step['action']}`; reward {step['reward']:g}; the partner reported {reported}."
                )
                if last > first:  # a looping episode: the same step again, said once
                    lines += ["", f"**Steps {first + 2}-{last + 1}.** The same as step {first + 1}, again each time."]
            if len(steps) > SHOWN_STEPS:
                lines += ["", f"({len(steps) - SHOWN_STEPS} more steps in the file.)"]
    return lines
