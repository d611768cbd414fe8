"""The zero-shot baseline command (issue 14) on the offline tiny T5."""

import csv

import pytest

from torchrl_glam.envs import get_environment
from torchrl_glam.training.zero_shot import main, run_zero_shot


def test_zero_shot_writes_one_row_per_setting_and_resumes(tmp_path, tiny_t5_path):
    out = tmp_path / "zero_shot.csv"
    rows = run_zero_shot(
        str(tiny_t5_path), str(out), label="tiny", goals=["simplified"], episodes=4, log=lambda *_: None
    )
    assert [(r["normalization"], r["mode"]) for r in rows] == [
        ("sum", "greedy"),
        ("sum", "sampled"),
        ("mean", "greedy"),
        ("mean", "sampled"),
    ]
    written = list(csv.DictReader(open(out)))
    assert len(written) == 4 and all(0.0 <= float(r["success"]) <= 1.0 for r in written)
    assert all(r["chat_template"] == "False" for r in written)  # the word tokenizer has no template
    # a rerun skips what is there; a new setting is appended
    assert (
        run_zero_shot(str(tiny_t5_path), str(out), label="tiny", goals=["simplified"], episodes=4, log=lambda *_: None)
        == []
    )
    main(
        [
            "--model",
            str(tiny_t5_path),
            "--label",
            "tiny",
            "--out",
            str(out),
            "--goals",
            "held_out",
            "--mode",
            "greedy",
            "--normalization",
            "mean",
            "--episodes",
            "4",
        ]
    )
    assert len(list(csv.DictReader(open(out)))) == 5


def test_zero_shot_rejects_bad_settings(tmp_path, tiny_t5_path):
    with pytest.raises(ValueError, match="unknown goals"):
        run_zero_shot(str(tiny_t5_path), str(tmp_path / "a.csv"), goals=["everything"])
    with pytest.raises(ValueError, match="has no chat template"):
        run_zero_shot(str(tiny_t5_path), str(tmp_path / "a.csv"), chat_template="on", episodes=2)


@pytest.fixture(scope="module")
def tiny_t5_path(tmp_path_factory):
    from torchrl_glam.offline import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "t5", kind="t5", seed=0)


def test_the_random_policy_gives_the_chance_level_without_a_model(tmp_path):
    out = tmp_path / "random.csv"
    rows = run_zero_shot("random", str(out), goals=["simplified"], episodes=8, log=lambda *_: None)
    assert [(r["model"], r["mode"]) for r in rows] == [("random", "random")]
    assert 0.0 <= rows[0]["success"] <= 1.0


def test_zero_shot_runs_on_babyai_with_its_own_goal_sets_and_types(tmp_path):
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    out = tmp_path / "babyai.csv"
    rows = run_zero_shot(
        None,
        str(out),
        modes=["greedy"],
        normalizations=["mean"],
        episodes=4,
        environment=get_environment("babyai"),
        max_steps=3,
        log=lambda *_: None,
    )
    assert [r["goals"] for r in rows] == ["train", "test"]
    header = out.read_text().splitlines()[0].split(",")
    assert "success/goto" in header and "success/grasp" not in header
    assert all(r["episode_length"] <= 3 for r in rows)
    with pytest.raises(ValueError, match="unknown goals"):
        run_zero_shot(None, str(out), goals=["held_out"], environment=get_environment("babyai"))


def test_zero_shot_levels_of_some_goal_types_only(tmp_path):
    """``--goal-types goto pickup``: the level of a run trained with ``goal_types=goto,pickup``."""
    pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra")
    out = tmp_path / "subset.csv"
    main(
        [
            "--model",
            "random",
            "--env",
            "babyai",
            "--goal-types",
            "goto",
            "pickup",
            "--episodes",
            "24",
            "--max-steps",
            "3",
            "--out",
            str(out),
        ]
    )
    rows = list(csv.DictReader(out.open()))
    assert [r["goals"] for r in rows] == ["train", "test"]
    for row in rows:
        assert row["success/goto"] != "" and row["success/pickup"] != ""
        assert row["success/open"] == row["success/putnext"] == row["success/pickup_then_goto"] == ""
    with pytest.raises(ValueError, match="no goal_types option"):
        run_zero_shot("random", str(tmp_path / "p.csv"), goals=["simplified"], episodes=4, goal_types=["go_to"])
