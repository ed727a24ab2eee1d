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


def test_a_static_rope_scaling_lengthens_the_context_and_the_sampler_matches_the_trainer_past_it(tokenizer):
    """model.rope_scaling {yarn, factor 2}: the tiny model's 4,096 positions become 8,192, and an
    episode sampled past position 4,096 (token by token, from the KV cache) has the logprobs the
    trainer's whole-row forward gives it (fp32: to float rounding). Dynamic scaling is refused: it
    would rotate a decoded key at the length it had then, a training forward at the row's."""
    import pytest
    import torch

    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.errors import ConfigError
    from agentic_rl.models.forward import sequence_logprobs

    model = tiny_model(tokenizer, rope_scaling={"rope_type": "yarn", "factor": 2.0}).eval()
    assert model.config.max_position_embeddings == 8192
    assert model.model.rotary_emb.rope_type == "yarn"
    assert not torch.equal(model.model.rotary_emb.inv_freq, tiny_model(tokenizer).model.rotary_emb.inv_freq)
    prompt = [int(x) for x in torch.randint(100, 5000, (4200,), generator=torch.Generator().manual_seed(0))]
    engine = HFEngine(model, tokenizer, precision="fp32")
    sample = engine.session(0).generate({0: prompt}, SamplingParams(max_new_tokens=6))[0]
    with torch.no_grad():
        want = sequence_logprobs(model, prompt + list(sample.ids))[len(prompt) - 1 :]
    torch.testing.assert_close(torch.tensor(sample.logprobs), want[: len(sample.ids)], atol=2e-4, rtol=0)
    for bad in ({"rope_type": "dynamic", "factor": 2.0}, {"rope_type": "yarn", "factor": 1.0}):
        with pytest.raises(ConfigError, match="rope_scaling"):
            tiny_model(tokenizer, rope_scaling=bad)
