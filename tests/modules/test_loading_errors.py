"""Loading options and clear errors for models that cannot be found."""

import pytest
import torch

from torchrl_glam.modules import LLMConfig, ModelNotFoundError, load_llm


def test_unknown_local_path_fails_fast_with_advice(tmp_path):
    with pytest.raises(ModelNotFoundError) as error:
        load_llm(LLMConfig(str(tmp_path / "no-such-model")))
    message = str(error.value)
    assert "no-such-model" in message and "local directory" in message
    assert "python -m torchrl_glam.offline.tiny" in message and "name_or_path=None" in message


def test_unreachable_hub_model_fails_with_advice():
    # HF_HUB_OFFLINE=1 (tests/conftest.py) and local_files_only: the hub is never contacted.
    with pytest.raises(
        ModelNotFoundError, match="(?s)Could not load the model .google/flan-t5-nonexistent.*offline default"
    ):
        load_llm(LLMConfig("google/flan-t5-nonexistent", local_files_only=True))


def test_lora_wraps_only_the_adapters_as_trainable(tiny_paths):
    llm = load_llm(LLMConfig(str(tiny_paths["llama"]), lora_rank=4, lora_alpha=8))
    trainable = {name for name, p in llm.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    assert any("q_proj.lora_A" in name for name in trainable)
    assert llm.model.training  # kept in train mode; dropout is off instead
    assert all(m.p == 0.0 for m in llm.model.modules() if isinstance(m, torch.nn.Dropout))


def test_options_dtype_and_target_modules(tiny_paths):
    llm = load_llm(
        LLMConfig(str(tiny_paths["t5"]), dtype="bfloat16", lora_rank=2, lora_target_modules=["q", "k", "v", "o"])
    )
    assert llm.is_encoder_decoder
    assert any(name.endswith("k.lora_A.default.weight") for name, _ in llm.model.named_parameters())
    assert next(p for n, p in llm.model.named_parameters() if "shared" in n).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        load_llm(LLMConfig(str(tiny_paths["t5"]), dtype="float7"))
    with pytest.raises(ValueError, match="only be trained through LoRA"):
        pytest.importorskip("bitsandbytes")
        load_llm(LLMConfig(str(tiny_paths["t5"]), quantization="4bit"))


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (self.marker,))


def test_weights_whose_pickle_would_run_code_are_refused_in_one_line(tiny_paths, tmp_path):
    # issue 69: a model folder holding an unsafe .bin was a traceback (nothing ran, but no advice)
    import pickle
    import shutil

    from torchrl_glam.modules.loading import ModelFilesError

    folder, marker = tmp_path / "model", tmp_path / "ran"
    shutil.copytree(tiny_paths["t5"], folder)
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"shared.weight": _RunsCode(marker)}))
    with pytest.raises(ModelFilesError, match=r"refusing the weights in .*nothing ran.*safetensors"):
        load_llm(LLMConfig(str(folder)))
    assert not marker.exists()
