"""Sweep files expand to the expected grids; Slurm settings merge."""

from pathlib import Path

import pytest
from config_names import by_name

from torchrl_glam.launch.launcher import main as launch_main
from torchrl_glam.launch.launcher import slurm_parameters
from torchrl_glam.launch.sweeps import expand_sweep, load_sweep, parse_seeds

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "slurm"
CPU_HER = ROOT / "experiments" / "cpu_figure2" / "presets" / "ppo_glam" / "cpu_her.yaml"


def test_parse_seeds():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("0,2,5-6") == [0, 2, 5, 6]
    assert parse_seeds(4) == [4]
    with pytest.raises(ValueError, match="bad seed range"):
        parse_seeds("3-1")


def test_critic_design_sweep_expands_to_four_designs_times_seeds(tmp_path):
    runs = load_sweep(SLURM / "sweeps" / "critic_designs.yaml", tmp_path)
    assert len(runs) == 4 * 2
    designs = {(r.overrides["critic_input"], r.overrides["critic_backprop"]) for r in runs}
    assert designs == {
        ("observation_action", True),
        ("observation_action", False),
        ("observation", True),
        ("observation", False),
    }
    assert all(r.overrides["goals"] == "simplified" and r.preset == "sac_glam_her" for r in runs)
    run = next(r for r in runs if r.overrides["critic_input"] == "observation" and not r.overrides["critic_backprop"])
    assert Path(run.run_dir).relative_to(tmp_path).parts[:2] == (
        "critic_designs",
        "critic_input-observation__critic_backprop-false",
    )
    assert len({r.run_dir for r in runs}) == len(runs)
    argv = run.argv()
    assert "--resume" in argv and "critic_backprop=false" in argv and f"seed={run.seed}" in argv


@pytest.mark.parametrize(
    "name, count",
    [
        ("update_schedule", 9 * 2),
        ("batch_sampling", 3 * 4),
        ("nstep_capacity", 5 * 4),
        ("figure2", 3 * 4),
        ("cpu_figure2", 4 * 3),
        ("ppo_her", 6 * 3),
        ("autotelic", 6 * 3),
        ("cpu_full", 18 * 3),
        ("cpu_full_200k", 3 * 3),
        ("babyai", 4 * 3),
        ("babyai_goto_pickup", 3 * 3),
    ],
)
def test_every_sweep_file_expands(tmp_path, name, count):
    runs = load_sweep(SLURM / "sweeps" / f"{name}.yaml", tmp_path)
    assert len(runs) == count
    assert load_sweep(SLURM / "sweeps" / f"{name}.yaml", tmp_path, seeds=[7])[0].seed == 7


def test_autotelic_sweep_changes_only_who_chooses_the_goals(tmp_path):
    from torchrl_glam.algorithms.sac_glam.config import make_config

    configs = {}
    for run in load_sweep(SLURM / "sweeps" / "autotelic.yaml", tmp_path, seeds=[0]):
        configs[run.name] = by_name(make_config(run.preset, run.overrides))  # every variant is valid
    for task_set in ("simplified", "full"):
        given = configs[f"{task_set}_goal_given"]
        for strategy in ("uniform", "lp"):
            other = configs[f"{task_set}_autotelic_{strategy}"]
            assert other["autotelic"] == strategy and given["autotelic"] == "off"
            assert {k for k in given if given[k] != other[k]} == {"autotelic"}
    assert configs["full_goal_given"]["goals"] == "train" and configs["simplified_goal_given"]["goals"] == "simplified"


def test_the_babyai_goto_pickup_sweep_trains_and_evaluates_on_those_kinds_only(tmp_path):
    configs = sweep_configs("babyai_goto_pickup", tmp_path)
    assert {name: c["goal_types"] for name, c in configs.items()} == dict.fromkeys(configs, ["goto", "pickup"])
    assert {name: c["env"] for name, c in configs.items()} == dict.fromkeys(configs, "babyai")
    assert configs["sac_glam_her"]["her"] and not configs["sac_glam"]["her"]


def sweep_configs(name: str, tmp_path) -> dict[str, dict]:
    """{variant: its full config (every setting, the preset's included)} of a sweep file's seed-0 runs."""
    from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
    from torchrl_glam.algorithms.sac_glam.config import make_config

    make = {"sac_glam": make_config, "ppo_glam": make_ppo_config}
    return {
        run.name: by_name(make[run.algorithm](run.preset, run.overrides))
        for run in load_sweep(SLURM / "sweeps" / f"{name}.yaml", tmp_path, seeds=[0])
    }


def test_cpu_full_sweep_compares_the_algorithms_on_one_setting(tmp_path):
    configs = sweep_configs("cpu_full", tmp_path)
    her, no_her = configs["sac_glam_her"], configs["sac_glam"]
    assert {k for k in her if her[k] != no_her[k]} == {"her"}
    slower_llm = configs["sac_glam_her_actorlr3e-5"]
    assert {k for k in her if her[k] != slower_llm[k]} == {"actor_lr"} and slower_llm["actor_lr"] == 3e-5
    assert {k for k in slower_llm if slower_llm[k] != configs["sac_glam_actorlr3e-5"][k]} == {"her"}
    hindsight = configs["sac_glam_her_actorlr3e-5_hindsight"]  # session 9: the prior, nothing else
    assert {k for k in slower_llm if slower_llm[k] != hindsight[k]} == {"model"}
    assert hindsight["model"] == "offline:tiny-t5-hindsight"
    critic_rate = configs["sac_glam_her_actorlr3e-5_criticllm3e-4"]  # session 10: that rate only
    assert {k for k in slower_llm if slower_llm[k] != critic_rate[k]} == {"critic_llm_lr"}
    assert critic_rate["critic_llm_lr"] == 3e-4 and slower_llm["critic_llm_lr"] is None
    critic_rate_no_her = configs["sac_glam_actorlr3e-5_criticllm3e-4"]  # session 11: its HER ablation
    assert {k for k in critic_rate if critic_rate[k] != critic_rate_no_her[k]} == {"her"}
    more_updates = configs["sac_glam_her_actorlr3e-5_criticllm3e-4_updates4"]  # session 12: updates only
    assert {k for k in critic_rate if critic_rate[k] != more_updates[k]} == {"num_updates"}
    assert (critic_rate["num_updates"], more_updates["num_updates"]) == (2, 4)
    dueling = configs["sac_glam_her_actorlr3e-5_criticllm3e-4_dueling"]  # session 12: the heads only
    assert {k for k in critic_rate if critic_rate[k] != dueling[k]} == {"critic_dueling"}
    actor_back = configs["sac_glam_her_criticllm3e-4"]  # session 13: the actor's rate back at the preset's
    assert {k for k in critic_rate if critic_rate[k] != actor_back[k]} == {"actor_lr"}
    assert actor_back["actor_lr"] == her["actor_lr"] == 1e-4
    target_llm = configs["sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm"]  # session 14: the target LLM only
    assert {k for k in critic_rate if critic_rate[k] != target_llm[k]} == {"target_llm"} and target_llm["target_llm"]
    one_step = configs["sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_nstep1"]  # session 16: one-step targets only
    assert {k for k in target_llm if target_llm[k] != one_step[k]} == {"n_step"} and one_step["n_step"] == 1
    shared = [
        "goals",
        "num_objects",
        "max_steps",
        "model",
        "gamma",
        "normalization",
        "total_steps",
        "eval_every",
        "eval_episodes",
        "eval_sets",
        "seed",
    ]
    for ppo in ("ppo_glam", "ppo_glam_her"):
        assert {k: configs[ppo][k] for k in shared} == {k: her[k] for k in shared}, ppo
    assert her["goals"] == "train" and her["total_steps"] >= 100_000 and "train_distribution" in her["eval_sets"]


def test_cpu_full_200k_sweep_is_cpu_full_at_twice_the_budget(tmp_path):
    shorter_runs, longer = sweep_configs("cpu_full", tmp_path), sweep_configs("cpu_full_200k", tmp_path)
    assert {c["total_steps"] for c in longer.values()} == {200_000}
    twins = "sac_glam_her_actorlr3e-5_criticllm3e-4_targetllm_twins_typesuniform"
    her, no_her = longer[twins], longer["sac_glam_actorlr3e-5_criticllm3e-4_targetllm_typesuniform"]
    assert {k for k in her if her[k] != no_her[k]} == {"her", "her_twins"} and her["her"] and her["her_twins"]
    for variant in (twins, "ppo_glam"):  # the same runs as in cpu_full, only longer
        shorter = shorter_runs[variant]
        assert {k for k in shorter if shorter[k] != longer[variant][k]} == {"total_steps"}, variant


def test_variants_and_grid_combine_and_bad_sweeps_are_named(tmp_path):
    runs = expand_sweep(
        {
            "name": "x",
            "variants": {"a": {"preset": "smoke"}, "b": {"her": False}},
            "grid": {"n_step": [1, 3]},
            "seeds": "0-1",
        },
        tmp_path,
    )
    assert len(runs) == 2 * 2 * 2
    assert {r.name for r in runs} == {"a__n_step-1", "a__n_step-3", "b__n_step-1", "b__n_step-3"}
    assert {r.preset for r in runs if r.name.startswith("a")} == {"smoke"}
    with pytest.raises(ValueError, match="unknown sweep keys"):
        expand_sweep({"grids": {}}, tmp_path)
    with pytest.raises(ValueError, match="non-empty list"):
        expand_sweep({"grid": {"n_step": 3}}, tmp_path)


def test_dry_run_lists_the_runs(tmp_path, capsys):
    assert (
        launch_main(
            ["--seeds", "0-2", "--preset", "smoke", "--runs-root", str(tmp_path), "--dry-run", "total_steps=64"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "3 runs" in out and "total_steps=64" in out and str(tmp_path / "smoke" / "seed2") in out


def test_ppo_runs_get_the_ppo_script_and_typed_overrides(tmp_path, capsys, monkeypatch):
    from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
    from torchrl_glam.launch.launcher import script_of

    monkeypatch.chdir(tmp_path)  # a study's preset file is found from the sweep file's folder, wherever one runs
    runs = load_sweep(SLURM / "sweeps" / "cpu_figure2.yaml", tmp_path)
    ppo = [r for r in runs if r.algorithm == "ppo_glam"]
    assert len(ppo) == 6 and script_of("ppo_glam").parts[-2:] == ("ppo_glam", "train.py")
    assert {r.preset for r in ppo} == {"cpu", str(CPU_HER)}
    for run in ppo:  # every variant is a valid config
        make_ppo_config(run.preset, run.overrides)
    for run in load_sweep(SLURM / "sweeps" / "ppo_her.yaml", tmp_path):  # every variant is a valid config
        make_ppo_config(run.preset, run.overrides)
    assert (
        launch_main(
            [
                "--algorithm",
                "ppo_glam",
                "--seeds",
                "0",
                "--preset",
                str(CPU_HER),
                "--runs-root",
                str(tmp_path),
                "--dry-run",
                "ppo_loss=kl",
                "epochs=4",
            ]
        )
        == 0
    )
    assert f"ppo_glam --preset {CPU_HER}" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown config field"):
        launch_main(["--algorithm", "ppo_glam", "--dry-run", "n_step=3"])


def test_slurm_settings_from_yaml_and_flags(tmp_path):
    params = slurm_parameters(str(SLURM / "cluster.yaml"), {"partition": "gpu", "time": 30}, ["constraint=v100"])
    assert params["slurm_partition"] == "gpu" and params["timeout_min"] == 30
    assert params["tasks_per_node"] == 4 and params["gpus_per_node"] == 4
    assert params["slurm_additional_parameters"] == {"constraint": "v100"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("partitions: gpu\n")
    with pytest.raises(ValueError, match="unknown Slurm settings"):
        slurm_parameters(str(bad), {}, [])


def test_a_sweep_may_write_its_overrides_by_section(tmp_path):
    # a sweep file's overrides by section reach the job's command line as paths
    sweep = {
        "name": "sections",
        "preset": "smoke",
        "overrides": {"hindsight": {"her": False}, "run": {"total_steps": 64}},
        "variants": {"short": {"algorithm": {"batch_size": 16}}},
        "seeds": [0],
    }
    (run,) = expand_sweep(sweep, tmp_path)
    assert run.overrides == {"hindsight.her": False, "run.total_steps": 64, "algorithm.batch_size": 16}
    assert {"hindsight.her=false", "run.total_steps=64", "algorithm.batch_size=16"} <= set(run.argv())
    with pytest.raises(ValueError, match="sets 'seed' in its overrides"):
        expand_sweep({**sweep, "overrides": {"run": {"seed": 3}}}, tmp_path)
