"""Issue 12, defect 8 and the thread count: bad values are refused naming the field, a missing GPU
fails before any model loads, num_threads is applied, and a diverging critic stops the run with a
nonzero exit code, a message naming what diverged, and the last good checkpoint kept."""

import json

import pytest
import torch

from torchrl_glam.algorithms.ppo_glam.config import make_ppo_config
from torchrl_glam.algorithms.sac_glam.config import make_config


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_grad_norm", -1.0),
        ("eval_episodes", 0),
        ("checkpoint_every", 0),
        ("log_every", 0),
        ("learning_starts", -5),
        ("critic_width", 0),
        ("gamma", float("nan")),
        ("critic_lr", float("inf")),
        ("tau", float("nan")),
        ("num_threads", 0),
        ("device", "gpu0"),
    ],
)
def test_bad_sac_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{field}="):
        make_config("smoke", {field: value})


@pytest.mark.parametrize(
    "field,value",
    [("eval_episodes", 0), ("log_every", 0), ("lr", float("nan")), ("value_width", 0), ("num_threads", 0)],
)
def test_bad_ppo_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"bad config value (\w+\.)*{field}="):
        make_ppo_config("smoke", {field: value})


def test_quantization_needs_lora():
    with pytest.raises(ValueError, match="model.quantization='4bit' with model.lora_rank=0.*LoRA"):
        make_config("smoke", {"quantization": "4bit", "lora_rank": 0})
    make_config("smoke", {"quantization": "4bit", "lora_rank": 4})  # fine


def test_cuda_without_a_gpu_is_refused_in_one_line_before_the_model_loads(monkeypatch, sac_example, tmp_path, capsys):
    import torchrl_glam.algorithms.sac_glam.train as script
    from torchrl_glam.training import factories

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = []
    monkeypatch.setattr(factories, "make_glam_agent", lambda *a, **k: loaded.append(1))  # main imports it
    argv = ["--preset", "smoke", "--run-dir", str(tmp_path / "run"), "device=cuda", "--no-progress"]
    with pytest.raises(ValueError, match="device='cuda' but torch sees no CUDA GPU.*device=cpu"):
        sac_example.main(argv)
    assert script.cli(argv) == 2  # a refusal: one line, no traceback, as for any bad value
    err = capsys.readouterr().err
    assert err.startswith("error: model.device='cuda'") and err.count("\n") == 1 and "Traceback" not in err
    assert not loaded and not (tmp_path / "run").exists()


@pytest.mark.parametrize("label", ["2.13.0+cpu", "2.13.0", None])  # a CPU wheel, a CUDA wheel, no metadata
def test_cuda_without_a_gpu_is_refused_whatever_torch_reports_of_itself(monkeypatch, label):
    import importlib.metadata

    from torchrl_glam.algorithms.sac_glam import make_config

    def version(name):
        if label is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return label

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device='cuda' but torch sees no CUDA GPU.*device=cpu"):
        make_config("smoke", {"device": "cuda"}).check_device()


def test_num_threads_is_applied(tmp_path, sac_example):
    torch.set_num_threads(2)
    try:
        assert (
            sac_example.main(
                [
                    "--preset",
                    "smoke",
                    "--run-dir",
                    str(tmp_path / "run"),
                    "--no-progress",
                    "total_steps=16",
                    "num_threads=1",
                ]
            )
            == 0
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)


@pytest.mark.slow
def test_a_diverging_critic_stops_the_run(tmp_path, sac_example, capsys):
    run = tmp_path / "run"
    code = sac_example.main(
        [
            "--preset",
            "smoke",
            "--run-dir",
            str(run),
            "--no-progress",
            "critic_lr=1e9",
            "checkpoint_every=48",
            "eval_every=1000",
        ]
    )
    assert code != 0
    err = capsys.readouterr().err
    assert "critic diverged" in err and "Q-value" in err and "critic_lr=1000000000.0" in err
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in saved["loss"].values() if v.is_floating_point())
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "diverged"


def test_divergence_bounds_follow_gamma_and_cover_ppo(tmp_path):
    from torchrl_glam.training.divergence import DivergenceError, check_divergence, value_bound

    sac = make_config("smoke", {"gamma": 0.9, "run_dir": str(tmp_path / "sac")})
    assert value_bound(sac.algorithm.gamma, sac.env.max_steps) == pytest.approx(10.0)
    check_divergence({"q_value": 5.0}, sac, 10)  # a healthy critic: within the bound
    with pytest.raises(DivergenceError, match="Q-value is -1e\\+10.*gamma=0.9.*critic_lr"):
        check_divergence({"q_value": -1e10}, sac, 10)
    ppo = make_ppo_config("smoke", {"run_dir": str(tmp_path / "ppo")})
    check_divergence({"loss_critic": 10.0}, ppo, 10)
    with pytest.raises(DivergenceError, match="value loss.*lr="):
        check_divergence({"loss_critic": float("nan")}, ppo, 10)
    with pytest.raises(DivergenceError, match="value loss"):
        check_divergence({"loss_critic": 1e12}, ppo, 10)
