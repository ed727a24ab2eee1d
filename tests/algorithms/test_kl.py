"""KL estimators, the KL reward penalty and the entropy bonus."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.kl import KL_ESTIMATORS, entropy_bonus, kl_penalty_rewards


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
