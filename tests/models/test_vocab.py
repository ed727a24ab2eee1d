"""The chunked vocabulary projection (`models/vocab.py`) against the plain one it replaces."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import vocab
from agentic_rl.models.vocab import chunked_token_logprobs


def _plain(hidden, weight, targets, temperature):
    logp = torch.log_softmax(torch.nn.functional.linear(hidden, weight).float() / temperature, dim=-1)
    return logp.gather(1, targets[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


def _run(fn, hidden, weight, targets, grad, temperature, bf16):
    h = hidden.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        lp, ent = fn(h, w, targets, temperature)
    (lp * grad).sum().backward()
    return lp.detach(), ent.detach(), h.grad, w.grad


@pytest.mark.parametrize("bf16", [False, True])
def test_chunked_equals_plain_forward_and_backward(bf16, monkeypatch):
    """Invariant: cutting the positions into chunks and rebuilding the softmax in the backward pass
    from the kept logits changes neither the logprobs, the entropy nor the gradients (in fp32 to
    float rounding; under bf16 autocast to one bf16 rounding of the logits' gradient, 2^-8)."""
    monkeypatch.setattr(vocab, "CHUNK", 16)  # 40 positions: two whole chunks and a part
    gen = torch.Generator().manual_seed(0)
    N, H, V, T = 40, 32, 300, 0.7
    hidden = torch.randn(N, H, generator=gen)
    weight = torch.randn(V, H, generator=gen) * 0.2
    targets = torch.randint(0, V, (N,), generator=gen)
    grad = torch.randn(N, generator=gen)
    want = _run(_plain, hidden, weight, targets, grad, T, bf16)
    got = _run(chunked_token_logprobs, hidden, weight, targets, grad, T, bf16)
    torch.testing.assert_close(got[0], want[0], atol=2e-6, rtol=0)
    torch.testing.assert_close(got[1], want[1], atol=5e-6, rtol=0)
    tol = 4e-3 if bf16 else 1e-6
    for g, w in zip(got[2:], want[2:]):
        assert g.dtype == torch.float32
        assert float((g - w).abs().max()) <= tol * float(w.abs().max())


def test_entropy_is_detached_and_no_grad_is_allowed():
    """The entropy is a metric (no gradient); without autograd the function still returns values."""
    hidden, weight, targets = torch.randn(5, 8, requires_grad=True), torch.randn(20, 8), torch.tensor([0, 3, 19, 7, 7])
    lp, ent = chunked_token_logprobs(hidden, weight, targets)
    assert lp.requires_grad and not ent.requires_grad
    with torch.no_grad():
        lp2, _ = chunked_token_logprobs(hidden, weight, targets)
    torch.testing.assert_close(lp2, lp.detach())
