"""The config in sections on OmegaConf: fields named by path or by their unique name, the
environment's own options in one section, presets as files with a purpose, a preset file of your
own, and a run's config.json by section."""

import json
import re
from pathlib import Path

import pytest
import yaml
from config_names import by_name, study_preset

from torchrl_glam.algorithms.ppo_glam.config import PPO_PRESETS, PPOGLAMConfig, make_ppo_config
from torchrl_glam.algorithms.sac_glam.config import PRESETS, SACGLAMConfig, make_config, parse_overrides
from torchrl_glam.training.cli import parse_command_line
from torchrl_glam.training.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_config_is_in_sections():
    cfg = make_config(study_preset("babyai", "cpu_babyai_goto_pickup"))
    assert set(cfg.to_dict()) == {"env", "model", "algorithm", "hindsight", "replay", "run"}
    assert set(make_ppo_config().to_dict()) == {"env", "model", "algorithm", "hindsight", "run"}
    assert (cfg.env.name, cfg.env.options["goal_types"], cfg.env.options["history"]) == (
        "babyai",
        ["goto", "pickup"],
        2,
    )
    assert (cfg.model.name, cfg.hindsight.her, cfg.algorithm.gamma, cfg.run.total_steps) == (
        "offline:tiny-t5-pretrained",
        True,
        0.9,
        100_000,
    )


def test_a_field_is_named_by_its_path_or_by_its_name_where_that_is_unique():
    assert parse_overrides(["hindsight.her=false"]) == parse_overrides(["her=false"]) == {"hindsight.her": False}
    # an environment's option by its name alone, where the overrides name the environment
    assert parse_overrides(["env=babyai", "history=2"]) == {"env.name": "babyai", "env.options.history": 2}
    assert parse_overrides(["env=babyai", "model=none"]) == {"env.name": "babyai", "model.name": None}
    with pytest.raises(ConfigError, match="'name' is ambiguous: say env.name or model.name"):
        parse_overrides(["name=babyai"])
    with pytest.raises(ConfigError, match="unknown config field 'hindsight.hre'; did you mean 'hindsight.her'"):
        parse_overrides(["hindsight.hre=true"])
    # the Python API takes the same names, and sections as dicts (a sweep file's YAML)
    cfg = make_config("smoke")
    assert cfg.replace(her=False) == cfg.replace({"hindsight.her": False}) == cfg.replace({"hindsight": {"her": False}})
    assert cfg.get("her") is cfg.hindsight.her and cfg.get("hindsight.her") is cfg.hindsight.her


def test_the_environment_s_own_options_are_in_env_options_and_refused_where_it_lacks_them():
    assert SACGLAMConfig().to_dict()["env"]["options"] == {}  # none until an environment is chosen
    assert make_config("smoke").to_dict()["env"]["options"] == {"num_objects": None}  # its declared ones
    assert set(make_config("smoke_babyai").env.options) == {"goal_types", "level_time_limits", "history", "wording"}
    with pytest.raises(ConfigError, match="unknown config field 'history'.*nor an option of env='playground'"):
        make_config("smoke", {"history": 2})
    with pytest.raises(ConfigError, match=r"unknown option env.options.history: env='playground' has no option"):
        make_config("smoke", {"env.options.history": 2})
    with pytest.raises(ConfigError, match=r"unknown option env.options.num_objects: env='babyai' has no option"):
        make_config("smoke_babyai", {"env.options.num_objects": 4})
    with pytest.raises(
        ConfigError, match=r"env.options.history=9: expected an integer from 0 to 8 \(an option of env='babyai'\)"
    ):
        make_config("smoke_babyai", {"history": 9})
    # BabyAI-Text's text: GLAM's by default, the former wording by name, anything else refused in one line
    assert make_config("smoke_babyai").environment.wording == "glam"
    assert make_config("smoke_babyai", {"wording": "readable"}).environment.wording == "readable"
    with pytest.raises(ConfigError, match=r"^bad config value env.options.wording='plain': expected none, or one of"):
        make_config("smoke_babyai", {"wording": "plain"})
    # the options belong to the environment: a copy naming another keeps only those it is given
    babyai = make_config("smoke_babyai", {"history": 2})
    assert babyai.replace(env="playground", goals="simplified").validate().env.options == {"num_objects": None}


def test_a_config_json_of_0_3_0_holding_every_environment_s_options_is_read():
    saved = make_config("smoke").to_dict()
    saved["env"]["options"] = {
        "num_objects": None,
        "goal_types": None,
        "history": 0,
        "wording": None,
        "level_time_limits": False,
    }
    assert SACGLAMConfig.from_dict(saved).env.options == {"num_objects": None}
    saved["env"]["options"]["history"] = 2  # a value 0.3.0 refused for Playground-Text
    with pytest.raises(ConfigError, match="env='playground' has no option 'history'"):
        SACGLAMConfig.from_dict(saved)


def test_a_config_json_of_0_3_0_with_her_in_replay_or_algorithm_is_read_under_hindsight():
    """Issue 86 (item 7): HER's fields are in one section, ``hindsight``, for both algorithms; a
    run of 0.3.0 (SAC-GLAM's in ``replay``, PPO-GLAM's in ``algorithm``) reads and resumes."""
    sac = make_config("smoke", {"her_twins": True, "her_ratio": 0.25}).to_dict()
    hindsight = sac.pop("hindsight")
    former = {**sac, "replay": {**sac["replay"], **hindsight}}
    assert "her_twins" in former["replay"] and "hindsight" not in former
    assert SACGLAMConfig.from_dict(former) == make_config("smoke", {"her_twins": True, "her_ratio": 0.25})
    ppo = make_ppo_config("cpu", {"her": True, "her_filter": "aligned"}).to_dict()
    hindsight = ppo.pop("hindsight")
    former = {**ppo, "algorithm": {**ppo["algorithm"], **hindsight}}
    assert PPOGLAMConfig.from_dict(former).hindsight.her_filter == "aligned"
    assert list(make_config("smoke").to_dict()) == ["env", "model", "run", "algorithm", "hindsight", "replay"]
    assert list(make_ppo_config("cpu").to_dict()) == ["env", "model", "run", "algorithm", "hindsight"]


def test_text_values_are_typed_like_the_command_line_and_typed_values_must_have_the_type():
    cfg = make_config("smoke", {"eval_sets": "train,held_out", "actor_lr": "1e-3", "max_grad_norm": "none"})
    assert (cfg.run.eval_sets, cfg.algorithm.actor_lr, cfg.algorithm.max_grad_norm) == (
        ["train", "held_out"],
        1e-3,
        None,
    )
    with pytest.raises(ConfigError, match=r"bad config value env.num_envs=True: expected an integer, got bool"):
        make_config("smoke", {"num_envs": True})  # a YAML file's `num_envs: true`


@pytest.mark.parametrize("presets", [PRESETS, PPO_PRESETS], ids=["sac_glam", "ppo_glam"])
def test_every_preset_is_a_file_with_a_one_line_purpose_and_a_valid_config(presets):
    config_class = SACGLAMConfig if presets is PRESETS else PPOGLAMConfig
    assert {"cpu", "smoke"} <= set(presets)
    for name in presets:
        text = presets.path(name).read_text()
        assert text.startswith("# ") and presets.purpose(name), name
        for link in re.findall(r"experiments/[\w/]+README\.md", text.split("\n\n")[0]):
            assert (ROOT / link).is_file(), (name, link)
        config_class().replace(preset_values(presets, name))  # every field a preset names exists, typed
        # the wheel ships these files without experiments/: each stands alone or extends another by name
        assert re.fullmatch(r"\w*", str(yaml.safe_load(text).get("extends", ""))), name


STUDY_PRESETS = sorted((ROOT / "experiments").glob("*/presets/*/*.yaml"))


def test_the_studies_keep_their_research_presets():
    assert {path.relative_to(ROOT).parts[1] for path in STUDY_PRESETS} >= {"autotelic", "babyai", "cpu_full", "smollm2"}


@pytest.mark.parametrize("path", STUDY_PRESETS, ids=lambda path: str(path.relative_to(ROOT / "experiments")))
def test_a_study_s_preset_is_a_file_with_a_purpose_and_a_valid_config_of_its_algorithm(path):
    algorithm = path.parent.name  # experiments/<study>/presets/<algorithm>/<name>.yaml
    make = {"sac_glam": make_config, "ppo_glam": make_ppo_config}[algorithm]
    assert path.read_text().startswith("# "), path
    assert path.stem not in (PRESETS if algorithm == "sac_glam" else PPO_PRESETS)  # one preset, one name
    make(str(path))


def preset_values(presets, name):
    from torchrl_glam.training.config import preset_overrides

    return preset_overrides(presets, name)


def test_a_preset_extends_another_and_changes_only_what_it_names():
    goto_pickup = study_preset("babyai", "cpu_babyai_goto_pickup")
    base, goto = make_config("cpu_babyai").flat_dict(), make_config(goto_pickup).flat_dict()
    assert {path for path in base if base[path] != goto[path]} == {"env.options.goal_types"}
    assert "extends: cpu_babyai" in Path(goto_pickup).read_text()


def test_a_preset_file_of_your_own_runs_from_the_command_line(tmp_path):
    mine = tmp_path / "no_her.yaml"
    mine.write_text("# cpu without HER, shorter\nextends: cpu\nhindsight:\n  her: false\nrun:\n  total_steps: 1000\n")
    cfg, options = parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(mine), "seed=2"])
    assert (cfg.hindsight.her, cfg.run.total_steps, cfg.algorithm.actor_lr) == (False, 1000, 1.5e-5)
    assert cfg.run.run_dir == str(Path("runs/sac_glam/no_her/seed2"))  # its own folder, by the file's name
    (tmp_path / "bad.yaml").write_text("extends: nowhere\n")
    with pytest.raises(ConfigError, match="extends 'nowhere', which is not a preset"):
        parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(tmp_path / "bad.yaml")])
    (tmp_path / "code.yaml").write_text("!!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):  # values only: nothing it holds can run
        parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(tmp_path / "code.yaml")])


def test_a_preset_file_extends_another_file_by_its_path_from_its_own_folder(tmp_path):
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "base.yaml").write_text("# shorter cpu\nextends: cpu\nrun:\n  total_steps: 1000\n")
    (tmp_path / "study" / "no_her.yaml").write_text(
        "# base without HER\nextends: ./base.yaml\nhindsight:\n  her: false\n"
    )
    (tmp_path / "other.yaml").write_text("# from another folder\nextends: study/no_her.yaml\nrun:\n  seed: 3\n")
    cfg, _ = parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(tmp_path / "other.yaml")])
    assert (cfg.hindsight.her, cfg.run.total_steps, cfg.run.seed, cfg.algorithm.actor_lr) == (False, 1000, 3, 1.5e-5)
    assert cfg.run.run_dir == str(Path("runs/sac_glam/other/seed3"))
    (tmp_path / "lost.yaml").write_text("extends: ./study/nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"extends './study/nowhere.yaml', but there is no file .*study/nowhere.yaml"):
        make_config(str(tmp_path / "lost.yaml"))
    (tmp_path / "study" / "base.yaml").write_text("extends: no_her.yaml\n")
    with pytest.raises(ConfigError, match="extends 'no_her.yaml', which extends it back"):
        make_config(str(tmp_path / "other.yaml"))


def test_a_run_s_config_json_is_by_section_and_loads_back(tmp_path):
    cfg = make_config("smoke", {"seed": 4, "num_objects": 3})
    (tmp_path / "config.json").write_text(cfg.to_json())
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["hindsight"]["her"] is True and saved["run"]["seed"] == 4
    assert SACGLAMConfig.from_dict(saved) == cfg


def test_a_saved_config_without_sections_is_refused_naming_the_version():
    from torchrl_glam.training.resume import resume_changes

    cfg = make_config("smoke", {"seed": 1})
    flat = by_name(cfg)  # torchrl_glam 0.2's config.json and checkpoints: field names, no sections
    refusal = (
        r"a saved SACGLAMConfig holds its fields in sections \(env, model, run, algorithm, hindsight, replay\)"
        r".*torchrl_glam 0\.2"
    )
    with pytest.raises(ConfigError, match=refusal):
        SACGLAMConfig.from_dict(flat)
    with pytest.raises(ConfigError, match=refusal):
        resume_changes(flat, cfg)
    assert resume_changes(cfg.to_dict(), cfg.replace(total_steps=800)) == {"run.total_steps": (400, 800)}


def test_an_exactly_integral_number_is_an_integer_and_a_fraction_is_refused(tmp_path):
    # issue 70: total_steps=1e4 and batch_size=64.0 were refused while 10_000 was accepted
    typed = parse_overrides(["total_steps=1e4", "batch_size=64.0", "seed=10_000", "actor_lr=1e-4"])
    assert typed == {
        "run.total_steps": 10_000,
        "algorithm.batch_size": 64,
        "run.seed": 10_000,
        "algorithm.actor_lr": 1e-4,
    }
    assert all(type(typed[path]) is int for path in ("run.total_steps", "algorithm.batch_size", "run.seed"))
    for text in ("1.5", "1e400", "nan"):
        with pytest.raises(ConfigError, match=rf"bad config value algorithm.batch_size='{text}': expected an integer"):
            parse_overrides([f"batch_size={text}"])
    mine = tmp_path / "mine.yaml"  # YAML reads 64.0 as a number and 1e4 as text
    mine.write_text("extends: cpu\nalgorithm:\n  batch_size: 64.0\nrun:\n  total_steps: 1e4\n")
    cfg, _ = parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(mine)])
    assert (cfg.algorithm.batch_size, cfg.run.total_steps) == (64, 10_000)
    with pytest.raises(ConfigError, match="expected an integer"):
        make_config("smoke", {"batch_size": 1.5})


def test_a_field_in_the_wrong_section_names_the_section_that_holds_it(tmp_path):
    # issue 70: `algorithm: her: false` in a preset file suggested algorithm.alpha_lr
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: cpu\nalgorithm:\n  her: false\n")
    with pytest.raises(ConfigError) as error:
        parse_command_line(SACGLAMConfig, PRESETS, ["--preset", str(mine)])
    assert "did you mean 'hindsight.her'?" in str(error.value) and "her is a field of hindsight" in str(error.value)
    with pytest.raises(
        ConfigError, match=r"her is a field of hindsight, not of replay; did you mean 'hindsight.her'\?"
    ):
        parse_overrides(["replay.her=false"])  # 0.3.0's path: refused, naming today's
    with pytest.raises(ConfigError, match=r"unknown config field 'algorithm.lr'; did you mean"):
        parse_overrides(["algorithm.lr=1"])  # a name no section holds: the nearest one, as before
