"""Model loading: the packaged SmolLM2 converts once to a safetensors cache; the tiny model is a real
Llama on the real tokenizer; our tool template is installed."""

from __future__ import annotations

import json

from agentic_rl.models.loader import smollm2_dir, tiny_model


def test_packaged_smollm2_cache(tokenizer):
    d = smollm2_dir()  # the tokenizer fixture already built it
    config = json.loads((d / "config.json").read_text())
    assert config["num_hidden_layers"] == 30 and config["hidden_size"] == 576
    assert "quantization_config" not in config  # a plain fp32 checkpoint, not a "quantized" one
    assert list(d.glob("*.safetensors"))


def test_tokenizer_special_tokens_and_template(tokenizer):
    assert tokenizer.eos_token == "<|im_end|>" == tokenizer.pad_token  # eos is pad: never mask it out of the loss
    assert "<tool_call>" in tokenizer.chat_template


def test_tiny_model_shapes(tokenizer):
    model = tiny_model(tokenizer)
    assert model.config.vocab_size == len(tokenizer)
    assert sum(p.numel() for p in model.parameters()) < 5_000_000
