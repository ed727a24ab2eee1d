"""The chunked vocabulary projection (`models/vocab.py`) against the plain one it replaces."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import vocab
from agentic_rl.models.vocab import chunked_token_logprobs


def _plain(hidden, weight, targets, temperature):
    logp = torch.log_softmax(torch.nn.functional.linear(hidden, weight).float() / temperature, dim=-1)
    return logp.gather(1, targets[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


def _run(fn, hidden, weight, targets, grad, temperature, bf16, grad_entropy=None):
    h = hidden.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        lp, ent = fn(h, w, targets, temperature)
    loss = (lp * grad).sum() + ((ent * grad_entropy).sum() if grad_entropy is not None else 0)
    loss.backward()
    return lp.detach(), ent.detach(), h.grad, w.grad


def _inputs(N=40, H=32, V=300):
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(N, H, generator=gen)
    weight = torch.randn(V, H, generator=gen) * 0.2
    return hidden, weight, torch.randint(0, V, (N,), generator=gen), torch.randn(N, generator=gen), \
        torch.randn(N, generator=gen)


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("bf16", [False, True])
def test_chunked_equals_plain_forward_and_backward(bf16, keep, monkeypatch):
    """Invariant: cutting the positions into chunks and rebuilding the softmax in the backward pass
    from the kept logits (keep) or from logits recomputed there changes neither the logprobs, the
    entropy nor the gradients (in fp32 to float rounding; under bf16 autocast to one bf16 rounding of
    the logits' gradient, 2^-8)."""
    monkeypatch.setattr(vocab, "CHUNK", 16)  # 40 positions: two whole chunks and a part
    hidden, weight, targets, grad, _ = _inputs()
    T = 0.7
    chunked = lambda *a: chunked_token_logprobs(*a, keep_logits=keep)  # noqa: E731
    want = _run(_plain, hidden, weight, targets, grad, T, bf16)
    got = _run(chunked, hidden, weight, targets, grad, T, bf16)
    torch.testing.assert_close(got[0], want[0], atol=2e-6, rtol=0)
    torch.testing.assert_close(got[1], want[1], atol=5e-6, rtol=0)
    tol = 4e-3 if bf16 else 1e-6
    for g, w in zip(got[2:], want[2:]):
        assert g.dtype == torch.float32
        assert float((g - w).abs().max()) <= tol * float(w.abs().max())


@pytest.mark.parametrize("keep", [True, False])
def test_the_entropy_gradient_is_the_plain_one(keep, monkeypatch):
    """With `entropy_grad` the entropy carries d H / d z_j = -p_j (log p_j + H) (models/vocab.py's
    derivation): with a loss sum(g_lp lp + g_H H), the gradients of the hidden states and the weight
    equal autograd's through the plain log-softmax, to fp32 rounding."""
    monkeypatch.setattr(vocab, "CHUNK", 16)
    hidden, weight, targets, grad, grad_h = _inputs()
    chunked = lambda *a: chunked_token_logprobs(*a, entropy_grad=True, keep_logits=keep)  # noqa: E731
    want = _run(_plain, hidden, weight, targets, grad, 0.7, False, grad_h)
    got = _run(chunked, hidden, weight, targets, grad, 0.7, False, grad_h)
    without = _run(lambda *a: chunked_token_logprobs(*a, keep_logits=keep), hidden, weight, targets, grad, 0.7, False)
    for g, w, o in zip(got[2:], want[2:], without[2:]):
        assert float((g - w).abs().max()) <= 1e-6 * float(w.abs().max())
        assert float((o - w).abs().max()) > 1e-2 * float(w.abs().max())  # the entropy's share is not small


def test_long_rows_recompute_the_logits_instead_of_keeping_them(monkeypatch):
    """Past KEEP_LOGITS_BYTES of logits the forward keeps none (the backward recomputes them): what
    the graph saves stays the inputs, whatever the number of positions."""
    hidden, weight, targets, _, _ = _inputs(N=64, V=300)
    assert vocab.keeps_logits(64, 300, torch.float32)
    monkeypatch.setattr(vocab, "KEEP_LOGITS_BYTES", 64 * 300 * 4 - 1)
    assert not vocab.keeps_logits(64, 300, torch.float32) and vocab.keeps_logits(64, 300, torch.bfloat16)
    monkeypatch.setattr(vocab, "CHUNK", 16)
    saved = {}
    for keep in (True, False, None):
        kept = saved.setdefault(keep, [])
        with torch.autograd.graph.saved_tensors_hooks(lambda t, kept=kept: kept.append(t) or t, lambda t: t):
            chunked_token_logprobs(hidden.clone().requires_grad_(), weight, targets, keep_logits=keep)
    assert sum(t.numel() for t in saved[True]) - sum(t.numel() for t in saved[False]) == 64 * 300
    assert [t.shape for t in saved[None]] == [t.shape for t in saved[False]]


def test_entropy_is_detached_and_no_grad_is_allowed():
    """The entropy is a metric (no gradient); without autograd the function still returns values."""
    hidden, weight, targets = torch.randn(5, 8, requires_grad=True), torch.randn(20, 8), torch.tensor([0, 3, 19, 7, 7])
    lp, ent = chunked_token_logprobs(hidden, weight, targets)
    assert lp.requires_grad and not ent.requires_grad
    with torch.no_grad():
        lp2, _ = chunked_token_logprobs(hidden, weight, targets)
    torch.testing.assert_close(lp2, lp.detach())
