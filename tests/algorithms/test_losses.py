"""Policy loss: hand-computed values, masked positions change nothing, micro-batching changes nothing."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.algorithms.losses import AGGREGATIONS, KL_ESTIMATORS, LossInputs, ppo_clip_loss


def test_ppo_clip_hand_computed():
    # token 1: ratio e^0.1 = 1.10517, A=+1 -> clipped at 1.2? no (1.105 < 1.2): loss = -1.10517
    # token 2: ratio e^0.5 = 1.64872, A=+1 -> min(1.649, 1.2) = 1.2: loss = -1.2 (clipped high)
    # token 3: ratio e^-0.5 = 0.60653, A=-1 -> min(-0.607, -0.8) = -0.8: loss = +0.8 (clipped low)
    logp = torch.tensor([[0.1, 0.5, -0.5]])
    out = ppo_clip_loss(LossInputs(logp, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, -1.0]]), torch.ones(1, 3)))
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[-math.exp(0.1), -1.2, 0.8]]), atol=1e-5, rtol=0)
    assert out.metrics["clip_high_tokens"] == 1 and out.metrics["clip_low_tokens"] == 1


def test_kl_estimators():
    # logp = log 0.5, ref = log 0.25: k1 = log 2 = 0.693147; r = 0.5, k3 = 0.5 - 1 - log 0.5 = 0.193147
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    torch.testing.assert_close(KL_ESTIMATORS.get("k1")(logp, ref), torch.tensor([0.693147]), atol=1e-6, rtol=0)
    torch.testing.assert_close(KL_ESTIMATORS.get("k3")(logp, ref), torch.tensor([0.193147]), atol=1e-6, rtol=0)


def _loss(logp, old, adv, mask, agg):
    out = ppo_clip_loss(LossInputs(logp, old, adv, mask))
    norm = mask.sum().item() if agg == "token-mean" else mask.shape[0]
    return AGGREGATIONS[agg](out.per_token_loss_BT, mask, norm)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(sorted(AGGREGATIONS)))
def test_masked_positions_change_nothing(seed, agg):
    """Invariant: garbage at loss-mask-0 positions (tokens, logprobs, advantages) changes neither the
    loss nor its gradient."""
    g = torch.Generator().manual_seed(seed)
    B, T = 3, 7
    mask = (torch.rand(B, T, generator=g) > 0.4).float()
    mask[:, 0] = 1
    logp = (-torch.rand(B, T, generator=g) * 3).requires_grad_()
    old = logp.detach() + torch.randn(B, T, generator=g) * 0.1
    adv = torch.randn(B, 1, generator=g).expand(B, T) * mask
    loss = _loss(logp, old, adv, mask, agg)
    (grad,) = torch.autograd.grad(loss, logp)
    noise = torch.randn(B, T, generator=g) * 100 * (1 - mask)
    logp2 = (logp.detach() + noise).requires_grad_()
    loss2 = _loss(logp2, old + noise, adv + noise, mask, agg)
    (grad2,) = torch.autograd.grad(loss2, logp2)
    torch.testing.assert_close(loss, loss2)
    torch.testing.assert_close(grad * mask, grad2 * mask)
    assert torch.all(grad2[mask == 0] == 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(sorted(AGGREGATIONS)), st.integers(1, 5))
def test_micro_batching_changes_nothing(seed, agg, split):
    """Invariant: with batch-global normalizers, the sum of micro-batch losses equals the batch loss."""
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 5
    mask = (torch.rand(B, T, generator=g) > 0.3).float()
    mask[:, 0] = 1
    logp = -torch.rand(B, T, generator=g)
    old = logp + torch.randn(B, T, generator=g) * 0.2
    adv = torch.randn(B, 1, generator=g).expand(B, T) * mask
    whole = _loss(logp, old, adv, mask, agg)
    norm = mask.sum().item() if agg == "token-mean" else B
    parts = sum(
        AGGREGATIONS[agg](ppo_clip_loss(LossInputs(logp[i:j], old[i:j], adv[i:j], mask[i:j])).per_token_loss_BT,
                          mask[i:j], norm)
        for i, j in zip(range(0, B, split), range(split, B + split, split))
    )
    torch.testing.assert_close(whole, parts)
