"""With LoRA, RL's KL reference is the SFT model (base + SFT adapter), with no second copy of the
weights: the SFT adapter is merged and a fresh one added, so "adapters disabled" is the SFT model."""

from __future__ import annotations

import torch

from agentic_rl.models.lora import apply_lora, reference_context, start_rl_adapter


def _logprobs(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(ids).logits, -1)


def test_reference_after_sft_is_the_sft_model(tiny, tokenizer):
    model = apply_lora(tiny, rank=4, alpha=8)
    with torch.no_grad():  # stand-in for SFT: move every adapter's B away from its zero init
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    ids = torch.tensor([tokenizer.encode("What is 6 * 7? <answer>42</answer>")])
    sft = _logprobs(model, ids)
    with reference_context(model):
        base = _logprobs(model, ids)
    assert not torch.allclose(sft, base, atol=1e-3)  # the adapter really changed the model

    rl_model = start_rl_adapter(model, rank=4, alpha=8)
    torch.testing.assert_close(_logprobs(rl_model, ids), sft, atol=1e-4, rtol=0)  # the fresh adapter is the identity
    with reference_context(rl_model):
        torch.testing.assert_close(_logprobs(rl_model, ids), sft, atol=1e-4, rtol=0)  # reference = SFT model
    n_weights = sum(p.numel() for n, p in rl_model.named_parameters() if "lora_" not in n)
    assert n_weights == sum(p.numel() for n, p in tiny.named_parameters() if "lora_" not in n)  # one copy
