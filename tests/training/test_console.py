"""What a user sees on the console: evaluations as they happen, a progress bar that says what it
shows and ends at the steps asked for, refusals without tracebacks, a finished run's report on
--resume, a --help that lists the fields, and a word when an asked-for logger is missing."""

import importlib.util
import re
import warnings
from pathlib import Path

import pytest

from torchrl_glam.algorithms.sac_glam.train import cli, main

SMOKE = [
    "--preset",
    "smoke",
    "total_steps=20",
    "eval_every=16",
    "checkpoint_every=16",
    "learning_starts=8",
    "log_every=8",
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("console") / "run"
    capture = pytest.MonkeyPatch()
    import io
    import sys

    out, err = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stdout", out)
    capture.setattr(sys, "stderr", err)
    try:
        code = main([*SMOKE, "--run-dir", str(run), "loggers=csv", "--progress"])
    finally:
        capture.undo()
    return run, code, out.getvalue(), err.getvalue()


def test_evaluations_are_printed_as_they_happen(finished_run):
    _, code, out, err = finished_run
    assert code == 0
    console = out + err
    assert "evaluation at 16 steps" in console and "evaluation at 24 steps" in console
    assert "success train " in console and "held_out " in console


def test_the_bar_names_the_sampled_success_and_ends_at_the_steps_asked_for(finished_run):
    _, _, _, err = finished_run
    assert "sampled_success=" in err
    assert "20/20" in err and "24/20" not in err  # 3 iterations of 8 environments: 24 steps run


def test_a_used_run_dir_is_refused_without_a_traceback(finished_run, capsys):
    run, *_ = finished_run
    assert cli([*SMOKE, "--run-dir", str(run), "loggers=csv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--resume" in err and "Traceback" not in err


def test_resuming_a_finished_run_reports_its_last_evaluation(finished_run, capsys):
    run, *_ = finished_run
    assert main([*SMOKE, "--run-dir", str(run), "loggers=csv", "--resume", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "success train 0." in out or "success train 1." in out, out


def test_help_lists_the_fields_and_the_default_run_dir(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "total_steps=50000" in out and "batch_size=" in out and "run_dir" in out
    # one help line per field, from its comment in the config's source, under its section
    assert re.search(r"\n  \[algorithm\]\n(    .*\n)*    batch_size=128 +transitions per gradient step\n", out), out
    # the options the chosen environment declares, after the fields
    assert re.search(r"\noptions of env='playground':[^\n]*\n(.*\n)*    num_objects=None +objects per scene", out), out
    # the shipped presets, each with its purpose, then where a study's are
    assert re.search(r"\n  cpu_babyai +BabyAI-Text's MixedTrainLocal as GLAM defines its tasks", out), out
    assert re.search(
        r"\n  FILE.yaml +a preset file of your own, or a study's:\s+experiments/<study>/presets/sac_glam/", out
    )
    assert "cpu_full" not in out.split("fields (")[0], out  # a study's preset is its study's file


def test_help_lists_the_options_of_the_environment_a_preset_or_the_command_line_chooses(capsys):
    for argv, expected in (
        (["--preset", "smoke_babyai", "--help"], r"\n    history=0 +past observations shown in the prompt"),
        (["env=textworld_coin_collector", "--help"], r"options of env='textworld_coin_collector'"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert re.search(expected, out), out
        assert "num_objects=" not in out, out  # Playground-Text's, not this environment's


@pytest.mark.parametrize("config_class", ["SACGLAMConfig", "PPOGLAMConfig"])
def test_every_field_has_a_help_line(config_class):
    from torchrl_glam.algorithms.ppo_glam import config as ppo_config
    from torchrl_glam.algorithms.sac_glam import config as sac_config
    from torchrl_glam.training.config import field_help

    config_class = getattr(sac_config, config_class, None) or getattr(ppo_config, config_class)
    help_lines = field_help(config_class)
    assert [path for path in config_class.field_types() if not help_lines.get(path)] == []


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is not None, reason="tensorboard is installed")
def test_a_missing_logger_that_was_asked_for_is_named(tmp_path):
    with pytest.warns(UserWarning, match="tensorboard not installed.*pip install tensorboard"):
        assert main([*SMOKE, "--run-dir", str(tmp_path / "run"), "--no-progress", "loggers=csv,tensorboard"]) == 0


@pytest.mark.parametrize(
    "override, named", [("seed=-1", "seed=-1"), ("total_stepz=5", "total_stepz"), ("batch_size=8.5", "batch_size")]
)
def test_a_bad_value_on_the_command_line_is_one_error_line_and_creates_nothing(override, named, tmp_path, capsys):
    run = tmp_path / "run"
    assert cli([*SMOKE, "--run-dir", str(run), override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and named in err and "Traceback" not in err
    assert not run.exists()


def test_each_preset_and_seed_gets_its_own_run_folder_and_piped_output_has_no_bar(tmp_path, monkeypatch, capsys):
    from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig
    from torchrl_glam.training.run import parse_command_line

    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(SMOKE) == 0
    console = capsys.readouterr()
    assert "evaluation at 16 steps" in console.out and "sampled_success=" not in console.err + console.out
    # a line says what the run does before its first wait
    assert 0 <= console.out.find("training to 20 environment steps in runs") < console.out.find("evaluation at 16")
    # the default loggers are the installed ones: no word on a missing TensorBoard
    assert not [w for w in caught if "tensorboard" in str(w.message).lower()]
    assert (tmp_path / "runs" / "sac_glam" / "smoke" / "seed0" / "config.json").exists()

    def run_dir(*argv):
        return parse_command_line(SACGLAMConfig, PRESETS, list(argv))[0].run.run_dir

    assert run_dir() == str(Path("runs/sac_glam/cpu/seed0"))
    assert run_dir("--preset", "cpu_babyai", "seed=3") == str(Path("runs/sac_glam/cpu_babyai/seed3"))
    assert run_dir("--run-dir", "mine", "seed=3") == "mine" and run_dir("run_dir=mine") == "mine"


def test_a_finished_run_leaves_a_report_with_its_curves(finished_run):
    run, _, out, _ = finished_run
    assert (run / "report.png").read_bytes().startswith(b"\x89PNG")
    summary = (run / "report.md").read_text()
    assert "| train | training goals" in summary and "| held_out | held-out goals" in summary
    assert f"report: {run / 'report.md'}, {run / 'report.png'}" in out


def test_without_matplotlib_the_report_is_its_summary_and_a_line_why(finished_run, tmp_path, monkeypatch, caplog):
    import shutil
    import sys

    from torchrl_glam.training.report import write_report

    run, *_ = finished_run
    shutil.copy(run / "evaluations.jsonl", tmp_path / "evaluations.jsonl")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert write_report(tmp_path, {"env": "playground"}) == [tmp_path / "report.md"]
    assert 'matplotlib is not installed (pip install "torchrl_glam[plots]")' in caplog.text


def test_piped_output_says_how_fast_the_run_goes_and_when_the_next_evaluation_comes(tmp_path, monkeypatch, capsys):
    # issue 70: a piped --preset cpu_babyai printed its header, then nothing for ~22 minutes
    from torchrl_glam.training import pace

    monkeypatch.setattr(pace, "PACE_EVERY_SECONDS", 0.0)  # a line every iteration instead of every minute
    assert main([*SMOKE, "--run-dir", str(tmp_path / "run"), "loggers=csv"]) == 0  # capsys: no terminal, no bar
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert re.fullmatch(r"step 8/20: [\d.]+ steps/s, next evaluation at 16 in ~[\d.]+ (s|min|h), done in ~.*", lines[0])
    assert any(line.startswith("step 16/20: ") and "next evaluation at 20 in" in line for line in lines), lines


def test_the_pace_after_an_evaluation_leaves_the_evaluation_out_of_the_rate(tmp_path, monkeypatch, capsys):
    # a TextWorld run's log said "0.2 steps/s, ..., done in ~14.1 h" after each evaluation, at 2 steps/s
    import time

    from torchrl_glam.training import pace, run

    monkeypatch.setattr(pace, "PACE_EVERY_SECONDS", 0.0)
    evaluate = run.evaluate

    def slow_evaluate(*args, **kwargs):  # an evaluation much longer than the iterations around it
        time.sleep(3.0)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(run, "evaluate", slow_evaluate)
    assert main([*SMOKE, "eval_every=8", "--run-dir", str(tmp_path / "run"), "loggers=csv"]) == 0
    pattern = r"step (\d+)/20: ([\d.]+) steps/s, .*done in ~([\d.]+) (s|min|h)"
    lines = {int(m[1]): m for m in re.finditer(pattern, capsys.readouterr().out)}
    after = lines[8]  # printed right after the evaluation at 8 (8 environments), in the same iteration
    # two evaluation sets of >= 3 s each were in its window: the rate leaves them out
    assert float(after[2]) > 8 / 6.0, after[0]
    # and the time left counts the evaluations still to come (at 16 and at the end), each as long as this one
    assert float(after[3]) * {"s": 1, "min": 60, "h": 3600}[after[4]] >= 2 * 6.0, after[0]


def test_the_pace_line_reads_in_seconds_minutes_and_hours():
    from torchrl_glam.training.pace import pace_line

    assert pace_line(1_200, 50_000, 7.4, 2_000) == (
        "step 1,200/50,000: 7.4 steps/s, next evaluation at 2,000 in ~1.8 min, done in ~1.8 h"
    )
    assert pace_line(10, 20, 1.0, None) == "step 10/20: 1.0 steps/s, done in ~10 s"


def test_a_stopped_run_says_the_command_that_continues_it(tmp_path, monkeypatch, capsys):
    # issue 70: Ctrl-C said where the checkpoint was, not how to continue, with "rank 0:" on one process
    import shlex
    import sys

    from torchrl_glam.training.preemption import STOP

    run = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["examples/sac_glam.py"])  # as the user ran it
    STOP.request()  # what Ctrl-C or SIGTERM does
    try:
        assert main([*SMOKE, "--run-dir", str(run), "--no-progress"]) == 3
    finally:
        STOP.reset()
    out = capsys.readouterr().out
    assert "rank 0" not in out and f"stopped at 8 environment steps; checkpoint in {run}" in out
    command = out.split("continue it with: ")[1].splitlines()[0]
    assert command == f"python examples/sac_glam.py --preset smoke --run-dir {shlex.quote(str(run))} --resume"
    assert main(shlex.split(command)[2:] + ["--no-progress"]) == 0  # the command continues the run to its end
    assert "rank 0" not in capsys.readouterr().out


def test_the_report_names_the_algorithm_the_preset_and_how_it_evaluates(finished_run):
    # issue 70: report.md and report.png named neither the algorithm nor the preset nor the evaluation
    import json

    run, *_ = finished_run
    episodes = json.loads((run / "config.json").read_text())["run"]["eval_episodes"]
    summary = (run / "report.md").read_text()
    assert summary.startswith("# Run report: SAC-GLAM+HER, preset smoke: playground"), summary
    assert f"the greedy policy (its most probable action), over {episodes} fixed episodes per evaluation set" in summary


def test_the_report_picture_says_the_same_and_its_legend_covers_no_curve(finished_run, tmp_path, monkeypatch):
    import json
    import shutil

    import matplotlib.pyplot as plt

    from torchrl_glam.training.report import write_report

    run, *_ = finished_run
    shutil.copy(run / "evaluations.jsonl", tmp_path / "evaluations.jsonl")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    write_report(tmp_path, json.loads((run / "config.json").read_text()), algorithm="SAC-GLAM", preset="smoke")
    (figure,) = figures
    assert "SAC-GLAM+HER, preset smoke" in figure._suptitle.get_text() and "greedy" in figure._suptitle.get_text()
    renderer = figure.canvas.get_renderer()
    legends = figure.legends + [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    assert legends
    for legend in legends:
        for ax in figure.axes:
            assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    plt.close(figure)


def test_the_report_shows_a_few_final_episodes_of_each_evaluation_set(finished_run):
    # issue 70: a text agent's picture is its transcript (the logs' texts/ folder was empty)
    import json

    run, *_ = finished_run
    final = json.loads((run / "logs" / "texts" / "final_episodes.json").read_text())
    assert sorted(final) == ["held_out", "train"] and all(len(episodes) == 3 for episodes in final.values())
    summary = (run / "report.md").read_text()
    section = summary.split("## A few episodes of the final evaluation")[1]
    for name, episodes in final.items():
        first = episodes[0]
        assert f"### {name}, episode 1 (greedy): {first['goal']}: " in section
        step = first["steps"][0]
        assert step["saw"].rstrip() in section and f"It took `{step['action']}`" in section
        assert step["action"] == step["candidates"][0][0]  # greedy: the most probable candidate
        assert f"Its top candidates: `{step['candidates'][0][0]}` {step['candidates'][0][1]:.2f}" in section


def test_help_with_a_preset_lists_that_presets_values_and_folder_in_whole_sentences(capsys):
    # issue 70: --preset X --help showed the default preset's values and folder, its lines cut at ~100 characters
    from torchrl_glam.algorithms.sac_glam.config import SACGLAMConfig
    from torchrl_glam.training.config import field_help

    with pytest.raises(SystemExit):
        main(["--preset", "cpu_babyai", "--help"])
    out = capsys.readouterr().out
    assert "the values of --preset cpu_babyai" in out and "\n    env=babyai " in out
    assert "total_steps=100000 " in out and "total_steps=50000 " not in out
    assert "go to runs/sac_glam/cpu_babyai/seed0" in " ".join(out.split())
    epilog = out.split("presets (--preset NAME")[1]
    assert not [line for line in epilog.splitlines() if len(line) > 100 or line.endswith("...")]
    # the longest help comment is all there, its words in order
    longest = max(field_help(SACGLAMConfig).values(), key=len)
    assert longest in " ".join(epilog.split())


def test_a_looping_episode_is_shown_once_per_repeated_step(tmp_path):
    import json

    from torchrl_glam.training.logging import FINAL_EPISODES
    from torchrl_glam.training.report import write_report

    step = {"saw": "You are in the kitchen. " * 20, "action": "look", "reward": 0.0, "reported": []}
    other = {**step, "action": "go east"}
    episode = {"goal": "take the coin", "success": False, "steps": [other, *[step] * 10, other]}
    (tmp_path / FINAL_EPISODES).parent.mkdir(parents=True)
    (tmp_path / FINAL_EPISODES).write_text(json.dumps({"held_out": [episode]}))
    (tmp_path / "evaluations.jsonl").write_text(
        json.dumps({"set": "held_out", "env_steps": 8, "wall_seconds": 1.0, "success": 0.0}) + "\n"
    )
    write_report(tmp_path, {"env": {"name": "playground"}})
    report = (tmp_path / "report.md").read_text()
    assert report.count("The agent saw") == 3  # step 1, step 2 (then 3-11 the same), step 12
    assert "**Steps 3-11.** The same as step 2, again each time." in report
    assert "**Step 12.**" in report


@pytest.mark.parametrize(
    "env, train, train_sampled",
    [
        ("playground", "training goals, types uniform", "training goals, types uniform, sampled policy"),
        ("textworld_coin_collector", "training goals", "training goals, sampled policy"),
        ("babyai", "training goals", "training goals, sampled policy"),
    ],
)
def test_the_report_names_goal_types_only_where_the_environment_draws_by_type(tmp_path, env, train, train_sampled):
    """A game's episodes play its own quest and a BabyAI-Text level its mission: "types uniform" said
    nothing there (issue 89)."""
    import json

    from torchrl_glam.training.report import write_report

    (tmp_path / "evaluations.jsonl").write_text(
        "".join(
            json.dumps({"set": name, "env_steps": 8, "wall_seconds": 1.0, "success": 0.5}) + "\n"
            for name in ("train", "train_sampled")
        )
    )
    write_report(tmp_path, {"env": {"name": env}})
    report = (tmp_path / "report.md").read_text()
    assert f"| train | {train} | 0.50 |" in report and f"| train_sampled | {train_sampled} | 0.50 |" in report


def test_the_final_line_names_each_set_as_the_report_does():
    from torchrl_glam.training.cli import _final_success

    line = _final_success("train_sampled/success", 0.5, "playground")
    assert line == "train_sampled 0.50 (training goals, types uniform, sampled policy)"
    assert _final_success("train/success", 0.25, "textworld_coin_collector") == "train 0.25 (training goals, greedy)"
