"""KL estimators, the KL reward penalty and the entropy bonus."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.kl import KL_ESTIMATORS, KL_LOSSES, entropy_bonus, kl_penalty_rewards


def test_kl_estimators_hand_computed():
    # logp = log 0.5, ref = log 0.25: log r = log(0.25 / 0.5) = -0.693147
    # k1 = -log r = 0.693147; k2 = 0.5 * 0.693147^2 = 0.240227; k3 = r - 1 - log r = 0.5 - 1 + 0.693147 = 0.193147
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    for name, value in [("k1", 0.693147), ("k2", 0.240227), ("k3", 0.193147)]:
        torch.testing.assert_close(KL_ESTIMATORS.get(name)(logp, ref), torch.tensor([value]), atol=1e-6, rtol=0)


def test_k1_k3_are_unbiased_on_a_known_pair():
    # pi = [0.7, 0.3], ref = [0.4, 0.6]: exact KL = 0.7 log(7/4) + 0.3 log(3/6)
    # = 0.7 * 0.559616 - 0.3 * 0.693147 = 0.391731 - 0.207944 = 0.183787.
    # The expectation under pi is a 2-term weighted sum, so k1 and k3 must hit it exactly.
    pi, ref = torch.tensor([0.7, 0.3]), torch.tensor([0.4, 0.6])
    for name in ("k1", "k3"):
        est = (pi * KL_ESTIMATORS.get(name)(pi.log(), ref.log())).sum()
        torch.testing.assert_close(est, torch.tensor(0.183787), atol=1e-6, rtol=0)


def test_kl_penalty_rewards():
    # k1 = 0.5 on sampled tokens; coef 0.1 -> reward -0.05; 0 at the masked token whatever its logprobs
    logp = torch.tensor([[-1.0, 30.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -90.0, -2.5]])
    r = kl_penalty_rewards(logp, ref, torch.tensor([[1, 0, 1.0]]), coef=0.1)
    torch.testing.assert_close(r, torch.tensor([[-0.05, 0.0, -0.05]]))
    assert not r.requires_grad


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from(KL_ESTIMATORS.names()), st.sampled_from(AGGREGATIONS.names()))
def test_kl_loss_term_ignores_masked_positions(seed, name, agg):
    # junk of +-200 at masked positions would overflow exp() in k3 if it were not selected away first
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(3, 5, generator=g) > 0.4).float()
    logp = (-torch.rand(3, 5, generator=g)).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(3, 5, generator=g)
    junk = 200 * torch.randn(3, 5, generator=g) * (1 - mask)
    a = AGGREGATIONS.get(agg)
    norm = a.normalizer(mask.sum(1), 8)
    fn = KL_ESTIMATORS.get(name)
    (grad,) = torch.autograd.grad(a(fn(logp, ref, mask), mask, norm), logp)
    dirty = (logp.detach() + junk).requires_grad_()
    loss2 = a(fn(dirty, ref - junk, mask), mask, norm)
    (grad2,) = torch.autograd.grad(loss2, dirty)
    assert torch.isfinite(loss2)
    torch.testing.assert_close(grad2, grad)
    assert torch.all(grad2[mask == 0] == 0)


def test_entropy_bonus_raises_entropy():
    # uniform-ish logits; the bonus -coef * mean H; one gradient step on it must raise H.
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.2, 0.1]]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0]])
    agg = AGGREGATIONS.get("token-mean")

    def entropy(z):
        lp = torch.log_softmax(z, -1)
        return -(lp.exp() * lp).sum(-1)

    h = entropy(logits)
    loss = entropy_bonus(h, mask, coef=0.1, aggregate=agg, norm=2)
    torch.testing.assert_close(loss, -0.1 * h.mean())
    (grad,) = torch.autograd.grad(loss, logits)
    assert float(entropy(logits.detach() - grad).mean()) > float(h.detach().mean())


def _expected_gradient(per_token_loss, theta, ref) -> torch.Tensor:
    """E_{x ~ pi}[d/dtheta loss(log pi(x), log ref(x))], pi = softmax(theta), computed exactly: every
    token's loss gradient weighted by its (detached) probability — the limit of the Monte-Carlo mean
    over many sampled tokens."""
    theta = theta.clone().requires_grad_()
    logp = torch.log_softmax(theta, -1)
    weights = logp.detach().exp()
    (weights * per_token_loss(logp, ref)).sum().backward()
    return theta.grad


def _kl_gradient(theta, ref, forward: bool = False) -> torch.Tensor:
    """d/dtheta KL(pi || ref) (or KL(ref || pi) with `forward`), by autograd on the exact sum."""
    theta = theta.clone().requires_grad_()
    logp = torch.log_softmax(theta, -1)
    kl = (ref.exp() * (ref - logp)).sum() if forward else (logp.exp() * (logp - ref)).sum()
    kl.backward()
    return theta.grad


@pytest.mark.parametrize("name", KL_LOSSES.names())
def test_every_kl_loss_descends_the_reverse_kl(name):
    """On a 6-token categorical with pi far from pi_ref, the expected gradient of each loss the config
    accepts is grad KL(pi || pi_ref) (float64, to 1e-10), and a Monte-Carlo mean over 200,000 sampled
    tokens agrees within 0.01 (its standard error is about 0.002)."""
    gen = torch.Generator().manual_seed(0)
    theta = torch.randn(6, generator=gen, dtype=torch.float64) * 2
    ref = torch.log_softmax(torch.randn(6, generator=gen, dtype=torch.float64) * 2, -1)
    want = _kl_gradient(theta, ref)
    torch.testing.assert_close(_expected_gradient(KL_LOSSES.get(name), theta, ref), want, atol=1e-10, rtol=0)
    x = torch.multinomial(torch.softmax(theta, -1), 200_000, replacement=True, generator=gen)
    t = theta.clone().requires_grad_()
    logp = torch.log_softmax(t, -1)[x]
    KL_LOSSES.get(name)(logp, ref[x]).mean().backward()
    torch.testing.assert_close(t.grad, want, atol=0.01, rtol=0)


def test_k1_and_plain_k3_as_losses_are_not_the_reverse_kl_gradient():
    """Why KL_LOSSES holds neither: k1's expected gradient is 0, plain k3's is grad KL(ref || pi)."""
    gen = torch.Generator().manual_seed(1)
    theta = torch.randn(6, generator=gen, dtype=torch.float64) * 2
    ref = torch.log_softmax(torch.randn(6, generator=gen, dtype=torch.float64) * 2, -1)
    torch.testing.assert_close(_expected_gradient(KL_ESTIMATORS.get("k1"), theta, ref), torch.zeros(6, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    plain_k3 = _expected_gradient(KL_ESTIMATORS.get("k3"), theta, ref)
    torch.testing.assert_close(plain_k3, _kl_gradient(theta, ref, forward=True), atol=1e-10, rtol=0)
    assert (plain_k3 - _kl_gradient(theta, ref)).abs().max() > 0.1
    assert "k1" not in KL_LOSSES
