"""The training benchmark: its loop timer, and ``--compare`` running two trees as subprocesses."""

import csv
import subprocess

import pytest
import torch

from torchrl_glam.benchmarks import loop_timer, training


def _git_checkout() -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=training.CURRENT_TREE, capture_output=True, text=True
    )
    return done.returncode == 0 and done.stdout.strip() == "true"


needs_git = pytest.mark.skipif(not _git_checkout(), reason="--compare needs a git checkout of torchrl_glam")


def test_timer_refuses_a_package_from_another_tree(tmp_path):
    with pytest.raises(SystemExit, match="not from the tree .*PYTHONPATH="):
        loop_timer.check_tree(tmp_path)
    assert loop_timer.check_tree(training.CURRENT_TREE).endswith("__init__.py")


def test_timer_refuses_overrides_that_move_the_end_of_the_loop():
    with pytest.raises(SystemExit, match="eval_every.*--steps"):
        loop_timer.time_training_loop(16, "smoke", ["eval_every=8"])


def test_timer_runs_the_loop_with_the_threads_asked_for():
    # today's script sets torch's threads from cfg.num_threads (default 1): the timer passes its own
    torch.set_num_threads(1)
    result = loop_timer.time_training_loop(20, "smoke", ["critic_width=8"], threads=2)
    assert result["threads"] == 2
    assert torch.get_num_threads() == 1  # the caller's setting is back (later tests run with it)
    assert result["steps"] == 24  # 20 rounded up to the smoke preset's 8 environments
    assert result["loop"] > 0 and result["startup"] > 0
    assert result["steps_per_second"] == pytest.approx(24 / result["loop"])


def test_timer_times_a_loop_over_any_environment():
    # the loop's start is its first environment step, whichever environment the preset names
    result = loop_timer.time_training_loop(16, "smoke_babyai", ["critic_width=8"])
    assert result["steps"] >= 16 and result["loop"] > 0


def test_the_profile_splits_the_loop_and_leaves_nothing_patched():
    from torchrl.envs import EnvBase

    from torchrl_glam.benchmarks.profile import LoopProfile
    from torchrl_glam.modules import LLMScorer

    originals = (EnvBase.step_and_maybe_reset, LLMScorer.forward, torch.Tensor.backward)
    profile = LoopProfile()
    with profile.patches():
        result = loop_timer.time_training_loop(160, "smoke", ["critic_width=8"], profile=profile)
    parts = profile.seconds
    for key in ("environment", "acting_forward", "update_forward", "backward", "encoder", "decoder", "attention"):
        assert parts[key] > 0, key  # 160 steps of smoke: past learning_starts, so updates ran
    top = parts["environment"] + parts["acting_forward"] + parts["update_forward"] + parts["backward"]
    assert top <= result["loop"]
    assert parts["encoder"] + parts["decoder"] <= parts["acting_forward"] + parts["update_forward"]
    assert profile.tokens["real"] > 0 and profile.tokens["padded"] >= 0
    assert any("padding:" in line for line in profile.table(result["loop"]))
    assert (EnvBase.step_and_maybe_reset, LLMScorer.forward, torch.Tensor.backward) == originals


def test_timer_refuses_a_run_whose_start_up_stepped_an_environment(monkeypatch):
    """An older tree pretrains its offline model on random play the first time it loads it: those
    environment steps came before the loop, and the timing began with the first of them (session
    23's first baseline row: 79,872 steps in 623 s). Such a run is refused, not reported."""
    from types import ModuleType

    from torchrl_glam.envs.playground import PlaygroundTextEnv

    script = loop_timer.load_sac_glam_script()

    def main_after_random_play(argv):  # a start-up that plays a few random steps first
        env = PlaygroundTextEnv(num_envs=4, goals="simplified")
        td = env.reset()
        for _ in range(3):
            td = env.rand_action(td)
            _, td = env.step_and_maybe_reset(td)
        return script.main(argv)

    first_use = ModuleType("first_use_script")
    first_use.main = main_after_random_play
    monkeypatch.setattr(loop_timer, "load_sac_glam_script", lambda: first_use)
    with pytest.raises(SystemExit, match="stepped environments 36 times where its loop takes 24"):
        loop_timer.time_training_loop(20, "smoke", ["critic_width=8"])


def test_prepare_runs_the_preset_once_untimed(monkeypatch, capsys):
    runs = []
    monkeypatch.setattr(loop_timer, "time_training_loop", lambda *args, **kwargs: runs.append((args, kwargs)))
    loop_timer.main(["--expect-tree", str(training.CURRENT_TREE), "--prepare", "--preset", "smoke", "critic_width=8"])
    assert runs == [((1, "smoke", ["critic_width=8"], 1), {"check_steps": False})]
    assert loop_timer.RESULT_PREFIX in capsys.readouterr().out


def test_a_killed_build_s_lock_file_is_removed_before_a_build(tmp_path):
    extensions = tmp_path / "torch_extensions"
    (extensions / "_torchrl").mkdir(parents=True)
    (extensions / "_torchrl" / "lock").write_text("")
    (extensions / "_torchrl" / "build.ninja").write_text("")
    with training._extensions_lock(extensions):
        assert not (extensions / "_torchrl" / "lock").exists()
    assert (extensions / "_torchrl" / "build.ninja").exists()


@needs_git
def test_compare_names_an_unknown_commit_and_bad_task_sets(tmp_path):
    with pytest.raises(SystemExit, match="no such commit"):
        training.main(["--compare", "no-such-commit-anywhere", "--worktree-dir", str(tmp_path)])
    with pytest.raises(SystemExit, match="task sets from"):
        training.main(["--compare", "HEAD", "--sets", "simplified,everything", "--worktree-dir", str(tmp_path)])
    with pytest.raises(SystemExit, match="--sets, not goals"):
        training.main(["--compare", "HEAD", "goals=train", "--worktree-dir", str(tmp_path)])


@pytest.mark.slow
@needs_git
def test_compare_runs_both_trees_and_prints_the_ratio(tmp_path, capsys):
    table = tmp_path / "compare.csv"
    worktrees = tmp_path / "worktrees"
    training.main(
        [
            "--compare",
            "HEAD",
            "--preset",
            "smoke",
            "--steps",
            "32",
            "--rounds",
            "1",
            "--sets",
            "simplified",
            "--csv",
            str(table),
            "--worktree-dir",
            str(worktrees),
            "critic_width=8",
        ]
    )
    out = capsys.readouterr().out
    assert "simplified ratio" in out
    rows = list(csv.DictReader(table.open()))
    assert [r["tree"] for r in rows] == ["baseline", "current"]  # round 1: the baseline first
    baseline, current = rows
    # each side imported its own tree: the baseline from the worktree, the current from this one
    assert baseline["torchrl_glam_file"].startswith(str(worktrees))
    assert current["torchrl_glam_file"].startswith(str(training.CURRENT_TREE))
    assert all(int(r["steps"]) == 32 and float(r["steps_per_second"]) > 0 for r in rows)
    # the worktree is gone, and git no longer lists it
    assert not any(worktrees.iterdir())
    listed = subprocess.run(["git", "worktree", "list"], cwd=training.CURRENT_TREE, capture_output=True, text=True)
    assert str(worktrees) not in listed.stdout


def _listed(path) -> bool:
    listed = subprocess.run(["git", "worktree", "list"], cwd=training.CURRENT_TREE, capture_output=True, text=True)
    return str(path) in listed.stdout


@needs_git
def test_baseline_worktree_is_removed_or_kept_and_reused(tmp_path):
    with training.baseline_worktree("HEAD", False, tmp_path / "fresh") as (tree, _):
        assert (tree / "torchrl_glam" / "__init__.py").exists() and _listed(tree)
    assert not _listed(tree) and not any((tmp_path / "fresh").iterdir())

    cache = tmp_path / "kept"
    try:
        with training.baseline_worktree("HEAD", True, cache) as (kept, _):
            pass
        assert kept.exists() and _listed(kept)
        with training.baseline_worktree("HEAD", False, cache) as (again, _):  # reused, and left in place
            assert again == kept
        assert kept.exists()
        subprocess.run(["rm", "-rf", str(kept)], check=True)  # deleted by hand: git still lists it
        with training.baseline_worktree("HEAD", True, cache) as (remade, _):
            assert remade == kept and (remade / "torchrl_glam" / "__init__.py").exists()
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(kept)], cwd=training.CURRENT_TREE, capture_output=True
        )
    assert not _listed(kept)
