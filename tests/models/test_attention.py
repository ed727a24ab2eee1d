"""The trainer's attention (`models/attention.py`): plain products where the scores are small, the
fused SDPA kernel otherwise; either way the model's own attention, to fp32 rounding."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from agentic_rl.models import attention, forward
from agentic_rl.models.attention import (
    EAGER_MAX_PER_HEAD,
    products,
    segment_attention_forward,
    train_attention_forward,
)
from agentic_rl.models.forward import token_logprobs
from agentic_rl.trainer.batching import make_batch
from agentic_rl.types import Trajectory


class _Module(torch.nn.Module):
    num_key_value_groups = 3  # 6 query heads on 2 key/value heads, as GQA models have
    is_causal = True


def _qkv(B: int, T: int, S: int, gen: torch.Generator):
    q = torch.randn(B, 6, T, 8, generator=gen, requires_grad=True)
    k = torch.randn(B, 2, S, 8, generator=gen, requires_grad=True)
    v = torch.randn(B, 2, S, 8, generator=gen, requires_grad=True)
    return q, k, v


def _padded_causal(B: int, T: int, S: int) -> torch.Tensor:
    """(B, 1, T, S) bool: a cache of S - T keys then T causal queries; row 0's last 2 keys are padding."""
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)[None, None].repeat(B, 1, 1, 1)
    mask[0, :, :, -2:] = False
    mask[0, :, -2:, -2:] = torch.eye(2, dtype=torch.bool)  # padding attends to itself, as HF's masks do
    return mask


@pytest.mark.parametrize("additive", [False, True])
def test_products_equal_sdpa_with_gradients(additive):
    """Invariant: the products compute the attention SDPA computes, forward and backward, for a
    grouped-query layer reading a cache through a padded causal mask (bool, or the additive float
    form the packed SFT batches use). Were the key/value heads mismatched with the query heads, the
    mask ignored or the softmax taken over the wrong axis, they would differ."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = _qkv(3, 5, 9, gen)
    mask = _padded_causal(3, 5, 9)
    if additive:
        mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    ref, _ = sdpa_attention_forward(_Module(), q, k, v, mask)
    ref.sum().backward()
    ref_grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    out = products(q, k, v, mask)
    out.sum().backward()
    assert out.shape == ref.shape == (3, 5, 6, 8)
    assert torch.allclose(out, ref, atol=1e-5)
    for got, want in zip((q.grad, k.grad, v.grad), ref_grads):
        assert torch.allclose(got, want, atol=1e-5)


def test_large_or_unmasked_attention_stays_on_sdpa(monkeypatch):
    """The products only where they are faster and plain: a small masked forward takes them; a
    forward past the per-head size, one with no mask (HF's causal shortcut, which SDPA aligns
    itself) and one with soft-capping go to SDPA."""
    calls = []
    monkeypatch.setattr(attention, "products", lambda *a, **kw: calls.append(1) or products(*a, **kw))
    gen = torch.Generator().manual_seed(1)
    module = _Module()
    q, k, v = _qkv(2, 4, 6, gen)
    train_attention_forward(module, q, k, v, _padded_causal(2, 4, 6))
    assert len(calls) == 1
    train_attention_forward(module, q, k, v, None)
    with pytest.raises(ValueError, match="softcap"):  # SDPA's own refusal: soft-capping never reaches the products
        train_attention_forward(module, q, k, v, _padded_causal(2, 4, 6), softcap=30.0)
    T = S = int(EAGER_MAX_PER_HEAD**0.5) + 1
    q, k, v = _qkv(1, T, S, gen)
    train_attention_forward(module, q, k, v, _padded_causal(1, T, S))
    assert len(calls) == 1


def test_training_forward_takes_the_products_and_matches_sdpa(tiny, make_group, monkeypatch):
    """End to end: the trainer's forward over a group sharing its prompt (a cache read through a
    padded mask) goes through the products, and its logprobs and gradients are those of the
    model's stock SDPA forward."""
    group = make_group(0, [1.0, 0.0, 1.0], torch.Generator().manual_seed(2))
    rows = list(group.trajectories)
    rows[1] = Trajectory(rows[1].task, rows[1].turns[:1], reward=0.0)  # a shorter row: padding
    batch = make_batch(rows, pad_id=0)
    tiny.train()

    def run():
        tiny.zero_grad(set_to_none=True)
        lp, _ = token_logprobs(tiny, batch)
        lp.sum().backward()
        return lp.detach(), {n: p.grad.clone() for n, p in tiny.named_parameters() if p.grad is not None}

    calls = []
    monkeypatch.setattr(attention, "products", lambda *a, **kw: calls.append(1) or products(*a, **kw))
    lp, grads = run()
    assert calls and tiny.config._attn_implementation == "sdpa"  # restored after the forward
    monkeypatch.setattr(forward, "training_attention", lambda decoder: nullcontext())  # the stock path
    calls.clear()
    lp_ref, grads_ref = run()
    assert not calls
    assert torch.allclose(lp, lp_ref, atol=1e-5)
    assert grads.keys() == grads_ref.keys() and grads
    for name, g in grads.items():
        assert torch.allclose(g, grads_ref[name], atol=1e-5), name


def test_segment_attention_is_each_segment_attending_alone(monkeypatch):
    """Invariant: attention over a row of segments is each segment's own causal attention, forward and
    backward, computed independently here by torch's SDPA over each segment's slice. The segments
    take both ways: 3 and 100 tokens the products (with a small causal mask), 597 and 700 SDPA's
    causal kernel (597^2 > 512^2); no mask over the row is given or made. A layer with a sliding
    window, whose mask is never built here, is refused rather than attended without its window."""
    calls = []
    monkeypatch.setattr(attention, "products", lambda *a, **kw: calls.append(a[0].shape[2]) or products(*a, **kw))
    gen = torch.Generator().manual_seed(3)
    q, k, v = _qkv(2, 700, 700, gen)
    spans = (((0, 3), (3, 600), (600, 700)), ((0, 700),))
    out, _ = segment_attention_forward(_Module(), q, k, v, None, segment_spans=spans)
    assert out.shape == (2, 700, 6, 8) and sorted(calls) == [3, 100]
    (out * torch.linspace(-1, 1, 8)).sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    def alone(b: int, s: int, e: int) -> torch.Tensor:  # (1, e - s, 6, 8): the segment as a row of its own
        kk, vv = (x[b : b + 1, :, s:e].repeat_interleave(3, dim=1) for x in (k, v))
        return torch.nn.functional.scaled_dot_product_attention(q[b : b + 1, :, s:e], kk, vv, is_causal=True).transpose(1, 2)

    ref = torch.cat([torch.cat([alone(b, s, e) for s, e in row], dim=1) for b, row in enumerate(spans)])
    (ref * torch.linspace(-1, 1, 8)).sum().backward()
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)  # fp32, as test_products_equal_sdpa_with_gradients
    for got, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(got, t.grad, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="sliding_window"):
        segment_attention_forward(_Module(), q, k, v, None, segment_spans=spans, sliding_window=16)
    with pytest.raises(ValueError, match="no mask"):
        segment_attention_forward(_Module(), q, k, v, torch.ones(2, 1, 700, 700, dtype=torch.bool), segment_spans=spans)
