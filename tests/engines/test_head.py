"""The engine's logits by vocabulary slices equal the model's own last-position logits."""

from __future__ import annotations

import torch

from agentic_rl.engines import head


def test_sliced_logits_equal_the_models_own(tiny, monkeypatch):
    monkeypatch.setattr(head, "SLICE", 1000)  # several slices and a ragged last one over 49,152
    last = head.LastLogits(tiny)
    assert last.split
    ids = torch.tensor([[5, 9, 200, 31], [7, 7, 8, 1000]])
    with torch.no_grad():
        got, _ = last(input_ids=ids)
        want = tiny(input_ids=ids).logits[:, -1].float()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_head_that_scales_its_logits_keeps_the_models_forward():
    from transformers import CohereConfig, CohereForCausalLM

    config = CohereConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=4, num_key_value_heads=2, logit_scale=0.5)
    model = CohereForCausalLM(config).eval()
    last = head.LastLogits(model)
    assert not last.split
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        torch.testing.assert_close(last(input_ids=ids)[0], model(input_ids=ids).logits[:, -1].float())
