"""Issue 43, item 7: one bad run or line does not abort launch.results' report: it is skipped with a
warning naming the file."""
import csv
import json

import pytest

from torchrl_glam.launch.results import aggregate


def _run(root, seed, lines, config='{"seed": 0}'):
    run = root / "her" / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "evaluations.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "config.json").write_text(config)
    return run


def _line(steps, success, **extra):
    return json.dumps({"env_steps": steps, "wall_seconds": steps / 10, "set": "train", "success": success,
                       **extra}).encode()


def _steps(out):
    return [(r["env_steps"], r["seeds"]) for r in csv.DictReader(open(out / "curves.csv")) if r["metric"] == "success"]


def test_a_truncated_config_skips_that_run_with_a_warning_naming_it(tmp_path):
    _run(tmp_path / "runs", 0, [_line(100, 0.1)])
    bad = _run(tmp_path / "runs", 1, [_line(100, 0.3)], config='{"seed": 1, "gam')
    with pytest.warns(UserWarning, match=rf"skipping run {bad}: {bad / 'config.json'} is not readable JSON"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    assert _steps(out) == [("100", "1")]


@pytest.mark.parametrize("bad_line, problem", [
    (b'{"env_steps": 200, "set": "train", "success": 0.5, "wall_seconds": 2.0, "note": "\xff\xfe"}', "utf-8"),
    (json.dumps({"env_steps": "200", "wall_seconds": 2.0, "set": "train", "success": 0.5}).encode(),
     "env_steps '200' is not an integer"),
    (json.dumps({"env_steps": 200, "set": "train", "success": 0.5}).encode(), "wall_seconds None is not a number"),
])
def test_a_bad_line_is_skipped_with_a_warning_naming_the_file(tmp_path, bad_line, problem):
    run = _run(tmp_path / "runs", 0, [_line(100, 0.1), bad_line, _line(300, 0.2)])
    with pytest.warns(UserWarning, match=rf"{run / 'evaluations.jsonl'}:2: skipping .*{problem}"):
        out = aggregate([tmp_path / "runs"], tmp_path / "out")
    assert _steps(out) == [("100", "1"), ("300", "1")]
