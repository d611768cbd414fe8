"""Issue 43, item 7: one bad run or line does not abort experiments.tools.results' report: it is
skipped with a warning naming the file. Issue 12, defect 9: results survive torn lines and seeds
that stopped early, and say so."""

import csv
import json

import pytest

from experiments.tools.results import aggregate


def _run(root, seed, lines, config='{"seed": 0}'):
    run = root / "her" / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "evaluations.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "config.json").write_text(config)
    return run


def _line(steps, success, **extra):
    return json.dumps(
        {"env_steps": steps, "wall_seconds": steps / 10, "set": "train", "success": success, **extra}
    ).encode()


def _steps(out):
    return [(r["env_steps"], r["seeds"]) for r in csv.DictReader(open(out / "curves.csv")) if r["metric"] == "success"]


def test_a_truncated_config_skips_that_run_with_a_warning_naming_it(tmp_path):
    _run(tmp_path / "runs", 0, [_line(100, 0.1)])
    bad = _run(tmp_path / "runs", 1, [_line(100, 0.3)], config='{"seed": 1, "gam')
    with pytest.warns(UserWarning, match=rf"skipping run {bad}: {bad / 'config.json'} is not readable JSON"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    assert _steps(out) == [("100", "1")]


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        (b'{"env_steps": 200, "set": "train", "success": 0.5, "wall_seconds": 2.0, "note": "\xff\xfe"}', "utf-8"),
        (
            json.dumps({"env_steps": "200", "wall_seconds": 2.0, "set": "train", "success": 0.5}).encode(),
            "env_steps '200' is not an integer",
        ),
        (json.dumps({"env_steps": 200, "set": "train", "success": 0.5}).encode(), "wall_seconds None is not a number"),
    ],
)
def test_a_bad_line_is_skipped_with_a_warning_naming_the_file(tmp_path, bad_line, problem):
    run = _run(tmp_path / "runs", 0, [_line(100, 0.1), bad_line, _line(300, 0.2)])
    with pytest.warns(UserWarning, match=rf"{run / 'evaluations.jsonl'}:2: skipping .*{problem}"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    assert _steps(out) == [("100", "1"), ("300", "1")]


def _fake_run(root, variant, seed, values, torn=False):
    run = root / variant / f"seed{seed}"
    run.mkdir(parents=True)
    lines = [
        json.dumps({"env_steps": 100 * (i + 1), "wall_seconds": 10.0 * (i + 1), "set": "train", "success": v})
        for i, v in enumerate(values)
    ]
    if torn:
        lines.append('{"env_steps": 900, "wall_sec')
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_torn_lines_are_skipped_with_a_warning_naming_the_file(tmp_path):
    run = _fake_run(tmp_path / "runs", "her", 0, [0.1, 0.2], torn=True)
    _fake_run(tmp_path / "runs", "her", 1, [0.3, 0.4])
    with pytest.warns(UserWarning, match=str(run / "evaluations.jsonl")):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    rows = list(csv.DictReader(open(out / "curves.csv")))
    assert [r["env_steps"] for r in rows] == ["100", "200"]


def test_unequal_seed_lengths_are_reported_not_cut(tmp_path):
    _fake_run(tmp_path / "runs", "her", 0, [0.1, 0.2, 0.3, 0.4])
    _fake_run(tmp_path / "runs", "her", 1, [0.3, 0.4])  # stopped early
    with pytest.warns(UserWarning, match="group 'her'.*unequal lengths"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    rows = [r for r in csv.DictReader(open(out / "curves.csv")) if r["metric"] == "success"]
    assert [(r["env_steps"], r["seeds"]) for r in rows] == [("100", "2"), ("200", "2"), ("300", "1"), ("400", "1")]
    assert float(rows[0]["mean"]) == pytest.approx(0.2)
    summary = list(csv.DictReader(open(out / "summary.csv")))[0]
    assert (summary["final_env_steps"], summary["seeds"], summary["seeds_in_group"]) == ("400", "1", "2")
