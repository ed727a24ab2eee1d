"""Value head and clipped value loss."""

from __future__ import annotations

import torch

from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.value import ValueHead, value_loss


def test_value_head_shape_and_zero_init():
    head = ValueHead(8)
    v = head(torch.randn(2, 5, 8))
    assert v.shape == (2, 5) and torch.all(v == 0)


def test_clipped_value_loss_hand_computed():
    # eps 0.2. token 0: old 0, V 1.0, R 1.0 -> err 0; V_clip = 0.2, err_clip 0.64 -> loss 0.32 (clipped)
    # token 1: old 0, V 0.1, R 1.0 -> err 0.81; V_clip = 0.1 (inside) -> loss 0.405
    # token 2: masked, junk
    v = torch.tensor([[1.0, 0.1, 50.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0.0]])
    out = value_loss(v, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, -50.0]]), mask, clip_eps=0.2)
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[0.32, 0.405, 0.0]]))
    assert out.metrics["value_clip_tokens"] == 1
    torch.testing.assert_close(out.metrics["value_sq_err_sum"], torch.tensor(0.81))
    (grad,) = torch.autograd.grad(out.per_token_loss_BT.sum(), v)
    # token 0 is on the clipped branch: V_clip is constant in V there -> gradient 0; token 1: V - R = -0.9
    torch.testing.assert_close(grad, torch.tensor([[0.0, -0.9, 0.0]]))
    plain = value_loss(v, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, -50.0]]), mask, clip_eps=None)
    torch.testing.assert_close(plain.per_token_loss_BT, torch.tensor([[0.0, 0.405, 0.0]]))


def test_value_loss_micro_batches_and_masking():
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(6, 5, generator=g) > 0.3).float()
    v = torch.randn(6, 5, generator=g).requires_grad_()
    old, ret = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    agg = AGGREGATIONS.get("token-mean")
    norm = agg.normalizer(mask.sum(1), None)
    whole = agg(value_loss(v, old, ret, mask).per_token_loss_BT, mask, norm)
    parts = sum(agg(value_loss(v[i:i + 2], old[i:i + 2], ret[i:i + 2], mask[i:i + 2]).per_token_loss_BT,
                    mask[i:i + 2], norm) for i in range(0, 6, 2))
    torch.testing.assert_close(parts, whole)
    (grad,) = torch.autograd.grad(whole, v)
    assert torch.all(grad[mask == 0] == 0)
    junk = 100 * (1 - mask)
    again = agg(value_loss(v + junk, old - junk, ret + junk, mask).per_token_loss_BT, mask, norm)
    torch.testing.assert_close(again, whole)


def test_critic_learns_returns():
    # a few SGD steps of the value head on fixed features move V toward the returns on sampled tokens
    torch.manual_seed(0)
    head = ValueHead(4)
    h = torch.randn(2, 3, 4)
    ret = torch.tensor([[1.0, 0.5, 0.0], [0.2, 0.2, 0.2]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1.0]])
    opt = torch.optim.SGD(head.parameters(), lr=0.3)
    agg = AGGREGATIONS.get("token-mean")
    losses = []
    for _ in range(20):
        v = head(h)
        loss = agg(value_loss(v, v.detach(), ret, mask, clip_eps=None).per_token_loss_BT, mask, 4)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]
