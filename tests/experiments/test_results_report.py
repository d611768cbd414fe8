"""The results options of issue 16's report, on hand-built run dirs laid out as real runs write
them: an autotelic agent's discovered goals over time (``--discovery``), success relative to a
reference variant at equal steps (``--reference``), named constant levels (``--level``)."""

import csv
import json
import warnings

import matplotlib
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from experiments.tools.results import Level, aggregate, curves, load_run, main, plot
from torchrl_glam.envs.playground import GoalCatalogue
from torchrl_glam.training.checkpoint import save_checkpoint

CATALOGUE = GoalCatalogue.default()
SIMPLIFIED = CATALOGUE.goal_set("simplified")  # the task set: 182 training goals
NOT_TRAIN = sorted(set(range(len(CATALOGUE))) - set(CATALOGUE.goal_set("train")))


def _scalar(run, name, points):
    """A TorchRL CSVLogger scalar file: ``step,value`` lines, no header."""
    path = run / "logs" / "scalars" / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.writelines(f"{step},{value}\n" for step, value in points)


def _run(root, variant, seed, train, held_out=None, steps=(2016, 4000), discovered=None, task_size=182, new=None):
    """A run dir: config.json, evaluations.jsonl (train and held-out, per goal type), the wall
    seconds scalar (the flush's and each evaluation's line, as real runs log them) and, for an
    autotelic run (``discovered``: {step: goals in memory}), its ``autotelic/*`` scalars and
    ``autotelic.jsonl`` (``new``: {logged step: {goal id: first-report step}}, the lines' ``new``
    entries of the runs logged since they exist)."""
    run = root / variant / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": seed, "goals": "simplified"}))
    held_out = held_out if held_out is not None else [0.0] * len(train)
    lines, wall = [], []
    for step, (s_train, s_held) in zip(steps, zip(train, held_out)):
        wall.append((step, step / 100))
        for k, (name, value) in enumerate([("train", s_train), ("held_out", s_held)]):
            wall.append((step, step / 100 + 0.5 * (k + 1)))
            lines.append(
                json.dumps(
                    {
                        "env_steps": step,
                        "wall_seconds": step / 100 + 0.5 * (k + 1),
                        "set": name,
                        "success": value,
                        "episode_length": 7.5,
                        "success/grasp": value,
                        "success/grow": value,
                    }
                )
            )
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    if discovered is not None:
        for step in discovered:
            wall.append((step, step / 100))
        _scalar(run, "autotelic/discovered", discovered.items())
        _scalar(run, "autotelic/discovered_train_fraction", [(t, np.float32(n / 8470)) for t, n in discovered.items()])
        _scalar(
            run, "autotelic/discovered_task_fraction", [(t, np.float32(n / task_size)) for t, n in discovered.items()]
        )
        _scalar(run, "autotelic/choice/lp", [(t, 0.8) for t in discovered])
        lines = []
        for t, n in discovered.items():
            line = {"env_steps": t, "discovered": n}
            if new is not None:
                line["discovered_train_fraction"] = float(np.float32(n / 8470))
                line["new"] = {CATALOGUE.goals[i]: step for i, step in new.get(t, {}).items()}
            line.update(
                {
                    "groups_with_goals": 1,
                    "groups": {
                        "grasp/animal": {"discovered": n, "attempts": 3, "recent_success": 0.5, "lp": 0.1, "chosen": 2}
                    },
                }
            )
            lines.append(json.dumps(line) + "\n")
        (run / "autotelic.jsonl").write_text("".join(lines))
    _scalar(run, "time/wall_seconds", sorted(wall))
    return run


def _rows(path, **match):
    return [r for r in csv.DictReader(open(path)) if all(r[k] == v for k, v in match.items())]


def test_discovered_share_of_the_training_goals_over_time_mean_and_std_over_seeds(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.5, 0.9])  # not autotelic: no discovery curve
    _run(runs, "autotelic_lp", 0, [0.1, 0.4], discovered={1024: 60, 2016: 100, 3008: 150, 4000: 170})
    lp1 = _run(runs, "autotelic_lp", 1, [0.3, 0.6], discovered={1024: 80, 2016: 120, 3008: 160, 4000: 174})
    # seed 1 was resumed from its 2016-step checkpoint: it logged 3008 again (the last line counts)
    _scalar(lp1, "autotelic/discovered", [(3008, 160), (4000, 174)])
    _scalar(lp1, "autotelic/discovered_train_fraction", [(3008, np.float32(160 / 8470))])
    _run(runs, "autotelic_uniform", 0, [0.1], steps=(2016,), discovered={1024: 50, 2016: 90})  # still running
    out = aggregate([runs], tmp_path / "out", discovery=True)

    assert (out / "discovery.png").stat().st_size > 1000
    fraction = _rows(out / "discovery.csv", group="autotelic_lp", quantity="discovered_train_fraction")
    assert [int(r["env_steps"]) for r in fraction] == [0, 1024, 2016, 3008, 4000]  # the memory starts empty
    assert [float(r["mean"]) for r in fraction] == pytest.approx(
        [0, 70 / 8470, 110 / 8470, 155 / 8470, 172 / 8470], abs=1e-6
    )
    assert float(fraction[1]["std"]) == pytest.approx(10 / 8470, abs=1e-6)
    assert (fraction[4]["min"], fraction[4]["max"]) == (
        str(round(float(np.float32(170 / 8470)), 6)),
        str(round(float(np.float32(174 / 8470)), 6)),
    )
    assert {r["seeds"] for r in fraction} == {"2"}
    # wall seconds from time/wall_seconds.csv at the same step (its last line there: 2016 steps were
    # logged by the flush, then by the two evaluations)
    assert [r["wall_seconds"] for r in fraction] == ["0.0", "10.2", "21.2", "30.1", "41.0"]
    total = _rows(out / "discovery.csv", group="autotelic_lp", quantity="discovered")
    assert [float(r["mean"]) for r in total] == [0.0, 70.0, 110.0, 155.0, 172.0]
    task = _rows(out / "discovery.csv", group="autotelic_lp", quantity="discovered_task_fraction")
    assert float(task[-1]["mean"]) == pytest.approx(172 / 182, abs=1e-6)
    uniform = _rows(out / "discovery.csv", group="autotelic_uniform", quantity="discovered")
    assert [(r["env_steps"], r["mean"], r["seeds"], r["seeds_in_group"]) for r in uniform] == [
        ("0", "0.0", "1", "1"),
        ("1024", "50.0", "1", "1"),
        ("2016", "90.0", "1", "1"),
    ]
    assert not _rows(out / "discovery.csv", group="goal_given")


def test_discovery_needs_an_autotelic_run_and_skips_torn_lines(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.5, 0.9])
    with pytest.raises(FileNotFoundError, match="none of the 1 runs has autotelic logs.*autotelic=lp or uniform"):
        aggregate([runs], tmp_path / "out", discovery=True)
    lp = _run(runs, "autotelic_lp", 0, [0.1, 0.4], discovered={1024: 60, 2016: 100})
    with open(lp / "logs/scalars/autotelic/discovered.csv", "a") as f:
        f.write("3008,")  # a run killed mid-write
    with pytest.warns(UserWarning, match="discovered.csv:3: skipping a torn"):
        out = aggregate([runs], tmp_path / "out", discovery=True)
    rows = _rows(out / "discovery.csv", group="autotelic_lp", quantity="discovered")
    assert [r["env_steps"] for r in rows] == ["0", "1024", "2016"]


def test_success_relative_to_the_reference_at_equal_steps(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.4, 1.0])
    _run(runs, "goal_given", 1, [0.6, 1.0])
    _run(runs, "autotelic_lp", 0, [0.1, 0.7, 0.75], steps=(2016, 4000, 6016), discovered={1024: 60})
    _run(runs, "autotelic_lp", 1, [0.3, 0.9], discovered={1024: 60})  # still running: no 6016 yet
    with pytest.warns(UserWarning, match="'autotelic_lp'.*unequal lengths"):
        out = aggregate([runs], tmp_path / "out", reference="goal_given")

    assert (out / "relative.png").stat().st_size > 1000
    lp = _rows(out / "relative.csv", group="autotelic_lp", set="train", metric="success")
    # 6016 steps: the reference has not been there, so no row at it (equal steps only)
    assert [r["env_steps"] for r in lp] == ["2016", "4000"]
    assert [r["final"] for r in lp] == ["False", "True"]
    first, final = lp
    assert (float(first["mean"]), float(first["reference_mean"]), float(first["ratio"])) == (0.2, 0.5, 0.4)
    assert first["meets_target"] == "False"
    assert (float(final["mean"]), float(final["std"]), float(final["min"]), float(final["max"])) == (0.8, 0.1, 0.7, 0.9)
    assert (float(final["reference_mean"]), float(final["reference_std"]), final["reference_seeds"]) == (1.0, 0.0, "2")
    assert (float(final["ratio"]), float(final["ratio_min"]), float(final["ratio_max"])) == (0.8, 0.7, 0.9)
    assert (final["target"], final["meets_target"], final["seeds"]) == ("0.8", "True", "2")
    # the held-out reference never succeeds: no ratio rather than a division by zero
    held = _rows(out / "relative_final.csv", group="autotelic_lp", set="held_out", metric="success")[0]
    assert (held["env_steps"], held["reference_mean"], held["ratio"], held["meets_target"]) == ("4000", "0.0", "", "")
    # the final table: one row per group, set and metric, the reference's own included (ratio 1)
    final_rows = list(csv.DictReader(open(out / "relative_final.csv")))
    assert len(final_rows) == 2 * 2 * 3 and all(r["final"] == "True" for r in final_rows)
    reference = _rows(out / "relative_final.csv", group="goal_given", set="train", metric="success/grasp")[0]
    assert (reference["ratio"], reference["meets_target"]) == ("1.0", "True")
    # a stricter target
    with pytest.warns(UserWarning, match="unequal lengths"):
        out = aggregate([runs], tmp_path / "out2", reference="goal_given", target=0.9)
    assert (
        _rows(out / "relative_final.csv", group="autotelic_lp", set="train", metric="success")[0]["meets_target"]
        == "False"
    )


def test_an_unknown_reference_names_the_groups(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.4, 1.0])
    _run(runs, "autotelic_lp", 0, [0.1, 0.7])
    with pytest.raises(ValueError, match="'goal_givn' is not one of the groups found: autotelic_lp, goal_given"):
        aggregate([runs], tmp_path / "out", reference="goal_givn")


def test_levels_are_drawn_on_the_success_panels_and_listed_in_the_csv(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.4, 1.0])
    levels = [Level.parse("random=0.32"), Level.parse("zero_shot@held_out=0.06")]
    out = aggregate([runs], tmp_path / "out", levels=levels)
    assert list(csv.reader(open(out / "levels.csv"))) == [
        ["level", "set", "value"],
        ["random", "all", "0.32"],
        ["zero_shot", "held_out", "0.06"],
    ]
    # a panel: one horizontal line per level, at its value, named in the legend
    run = load_run(runs / "goal_given" / "seed0")
    run["group"] = "goal_given"
    fig, ax = plt.subplots()
    plot(curves([run], "train", "success"), "steps", "train goals", tmp_path / "unused.png", ax=ax, levels=levels)
    lines = {line.get_label(): line for line in ax.lines}
    assert set(lines) == {"goal_given (n=1)", "random = 0.32", "zero_shot = 0.06"}
    assert list(lines["random = 0.32"].get_ydata()) == [0.32, 0.32]
    plt.close(fig)
    # no level: the CSV has its header only
    out = aggregate([runs], tmp_path / "out3")
    assert list(csv.reader(open(out / "levels.csv"))) == [["level", "set", "value"]]


@pytest.mark.parametrize(
    "text", ["random", "random=", "=0.3", "random=high", "random=1.5", "random=nan", "random@=0.3", "a b=0.3"]
)
def test_a_bad_level_is_refused_with_the_expected_form(text):
    with pytest.raises(ValueError, match=r"NAME=VALUE or NAME@SET=VALUE with VALUE a success rate in \[0, 1\]"):
        Level.parse(text)


def test_a_level_for_a_missing_set_or_given_twice_is_refused(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "goal_given", 0, [0.4, 1.0])
    with pytest.raises(ValueError, match="no evaluation set 'heldout' in these runs \\(they have train, held_out\\)"):
        aggregate([runs], tmp_path / "out", levels=[Level.parse("zero_shot@heldout=0")])
    with pytest.raises(ValueError, match="level 'random' given twice"):
        aggregate([runs], tmp_path / "out", levels=[Level.parse("random=0.3"), Level.parse("random=0.32")])


def test_the_command_line_writes_the_report(tmp_path, capsys):
    runs = tmp_path / "runs"
    _run(runs, "simplified_goal_given", 0, [0.4, 1.0])
    _run(runs, "simplified_autotelic_lp", 0, [0.1, 0.7], discovered={1024: 60, 2016: 100})
    assert (
        main(
            [
                str(runs),
                "--out",
                str(tmp_path / "out"),
                "--level",
                "random=0.32",
                "--level",
                "zero_shot=0.0",
                "--reference",
                "simplified_goal_given",
                "--discovery",
            ]
        )
        == 0
    )
    written = capsys.readouterr().out
    for name in [
        "discovery.csv",
        "discovery.png",
        "levels.csv",
        "relative.csv",
        "relative_final.csv",
        "relative.png",
        "curves.csv",
    ]:
        assert name in written and (tmp_path / "out" / name).exists()
    with pytest.raises(SystemExit):
        main([str(runs), "--out", str(tmp_path / "out"), "--level", "random:0.32"])
    assert "--level random=0.32" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(runs), "--out", str(tmp_path / "out"), "--reference", "simplified_goal_given", "--target", "0"])
    assert "--target 0.0" in capsys.readouterr().err


def test_discovery_is_exact_at_every_step_from_the_first_report_steps_in_the_log(tmp_path):
    runs = tmp_path / "runs"
    a, b, c = (int(i) for i in SIMPLIFIED[:3])
    outside = NOT_TRAIN[0]
    # seed 0: goals a at step 5, b at 40 (logged at 64), c at 70 and a non-training goal at 90 (logged at 128)
    _run(runs, "lp", 0, [0.1, 0.4], discovered={64: 2, 128: 4}, new={64: {a: 5, b: 40}, 128: {c: 70, outside: 90}})
    # seed 1: goal b at step 20, c at 100 (its log stops at 96 here: the scalars take over after it)
    lp1 = _run(runs, "lp", 1, [0.3, 0.6], discovered={64: 1, 96: 1}, new={64: {b: 20}, 96: {}})
    _scalar(lp1, "autotelic/discovered", [(128, 2)])
    _scalar(lp1, "autotelic/discovered_train_fraction", [(128, np.float32(2 / 8470))])
    out = aggregate([runs], tmp_path / "out", discovery=True)

    total = _rows(out / "discovery.csv", group="lp", quantity="discovered")
    # a point wherever a seed's count changes (the step after a report), up to the shortest log (96)
    assert [(int(r["env_steps"]), float(r["mean"]), r["seeds"], r["exact"]) for r in total] == [
        (0, 0.0, "2", "True"),
        (6, 0.5, "2", "True"),
        (21, 1.0, "2", "True"),
        (41, 1.5, "2", "True"),
        (64, 1.5, "2", "True"),
        (71, 2.0, "2", "True"),
        (91, 2.5, "2", "True"),
        (96, 2.5, "2", "True"),
        (128, 3.0, "2", "False"),
    ]  # seed 1's 128 comes from its scalars
    assert float(total[3]["std"]) == 0.5 and (total[6]["min"], total[6]["max"]) == ("1.0", "4.0")
    train = _rows(out / "discovery.csv", group="lp", quantity="discovered_train_fraction")
    assert float(train[-2]["mean"]) == pytest.approx(2 / 8470, abs=1e-6)  # the non-training goal is not counted
    task = _rows(out / "discovery.csv", group="lp", quantity="discovered_task_fraction")
    assert float(task[-2]["mean"]) == pytest.approx(2 / 182, abs=1e-6)
    # wall seconds: linear between the logged ones (64 steps: 0.64 s)
    assert [r["wall_seconds"] for r in total[:5]] == ["0.0", "0.1", "0.2", "0.4", "0.6"]


def test_runs_logged_before_the_first_report_steps_are_exact_from_their_checkpoint(tmp_path):
    runs = tmp_path / "runs"
    a, b = (int(i) for i in SIMPLIFIED[:2])
    lp = _run(runs, "lp", 0, [0.1, 0.4], discovered={64: 1, 128: 2, 192: 2})  # autotelic.jsonl without "new"
    first_seen = torch.full((len(CATALOGUE),), -1, dtype=torch.int64)
    first_seen[a], first_seen[b] = 10, 100
    # what AutotelicGoals puts in the checkpoint (its extra state), saved at 128 steps
    save_checkpoint(
        {"autotelic": {"_extra_state": {"memory": {"first_seen": first_seen}, "env_steps": 128}}, "wall_seconds": 1.28},
        lp,
    )
    out = aggregate([runs], tmp_path / "out", discovery=True)
    total = _rows(out / "discovery.csv", group="lp", quantity="discovered")
    assert [(int(r["env_steps"]), float(r["mean"]), r["exact"]) for r in total] == [
        (0, 0.0, "True"),
        (11, 1.0, "True"),
        (64, 1.0, "True"),
        (101, 2.0, "True"),
        (128, 2.0, "True"),
        (192, 2.0, "False"),
    ]  # after the checkpoint: the logged scalars
    # the report only reads: a live run's checkpoint temporary stays; a torn newest checkpoint
    # falls back to the previous one, with a warning naming the run
    (lp / ".checkpoint-1234.tmp").write_bytes(b"being written")
    (lp / "checkpoint.pt").rename(lp / "checkpoint.prev.pt")
    (lp / "checkpoint.pt").write_bytes(b"torn")
    with pytest.warns(UserWarning, match="falls back to the previous checkpoint") as caught:
        again = aggregate([runs], tmp_path / "again", discovery=True)
    assert (lp / ".checkpoint-1234.tmp").exists()
    assert any(str(lp) in str(w.message) for w in caught)
    assert (again / "discovery.csv").read_text() == (out / "discovery.csv").read_text()
    (lp / "checkpoint.prev.pt").replace(lp / "checkpoint.pt")
    # a goal-given run's checkpoint is never read
    given = _run(runs, "given", 0, [0.5, 0.9])
    (given / "checkpoint.pt").write_bytes(b"not a checkpoint")  # reading it would warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aggregate([runs], tmp_path / "out", discovery=True)


def test_the_report_lists_what_each_run_ran_on_and_says_when_they_differ(tmp_path, capsys):
    # issue 70: seeds run on two machines differ after 2k steps; the results tool says they ran elsewhere
    from torchrl_glam.training.provenance import current_environment

    runs = tmp_path / "runs"
    _run(runs, "a", 0, [0.4, 1.0])
    _run(runs, "a", 1, [0.5, 0.9])
    _run(runs, "a", 2, [0.5, 0.9])  # written before environment.json existed
    record = current_environment()
    (runs / "a" / "seed0" / "environment.json").write_text(json.dumps(record))
    # kernels other than this machine's (an AVX2-only CPU runs this test too)
    other = "AVX512" if record["torch"]["cpu_capability"] != "AVX512" else "AVX2"
    record["cpu"]["flags"] = [other.lower()]
    record["torch"]["cpu_capability"] = other
    (runs / "a" / "seed1" / "environment.json").write_text(json.dumps(record))
    assert main([str(runs), "--out", str(tmp_path / "out")]) == 0
    assert "2 different environments" in capsys.readouterr().out
    with open(tmp_path / "out" / "environments.csv", newline="") as f:
        rows = {row["run"].split("/")[-1]: row["environment"] for row in csv.DictReader(f)}
    assert f"{other} kernels" in rows["seed1"] and f"{other} kernels" not in rows["seed0"] and rows["seed2"] == ""
