"""Policy losses against hand-computed numbers. Masking, micro-batching and the ratio-1 gradient are
proven for every loss x estimator x aggregation in test_properties.py."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.algorithms.losses import POLICY_LOSSES, LossInputs, cispo_loss, gspo_loss, ppo_clip_loss


def test_ppo_clip_hand_computed():
    # token 1: ratio e^0.1 = 1.10517, A=+1 -> clipped at 1.2? no (1.105 < 1.2): loss = -1.10517
    # token 2: ratio e^0.5 = 1.64872, A=+1 -> min(1.649, 1.2) = 1.2: loss = -1.2 (clipped high)
    # token 3: ratio e^-0.5 = 0.60653, A=-1 -> min(-0.607, -0.8) = -0.8: loss = +0.8 (clipped low)
    logp = torch.tensor([[0.1, 0.5, -0.5]])
    out = ppo_clip_loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=torch.zeros(1, 3),
                                   advantages_BT=torch.tensor([[1.0, 1.0, -1.0]]), loss_mask_BT=torch.ones(1, 3),
                                   clip_low=0.2, clip_high=0.2))
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[-math.exp(0.1), -1.2, 0.8]]), atol=1e-5, rtol=0)
    assert out.metrics["clip_high_tokens"] == 1 and out.metrics["clip_low_tokens"] == 1
    # ratio stats over the 3 tokens
    assert out.metrics["tokens"] == 3
    torch.testing.assert_close(out.metrics["ratio_sum"], torch.tensor(math.exp(0.1) + math.exp(0.5) + math.exp(-0.5)))
    torch.testing.assert_close(out.metrics["ratio_max"], torch.tensor(math.exp(0.5)))
    torch.testing.assert_close(out.metrics["ratio_min"], torch.tensor(math.exp(-0.5)))


def test_clip_higher_is_decoupled():
    # DAPO clip-higher: eps_low 0.2, eps_high 0.28. ratio e^0.2 = 1.2214 with A = +1 is inside
    # [0.8, 1.28] -> unclipped, loss -1.2214; ratio e^-0.25 = 0.7788 with A = -1 is below 0.8 -> +0.8
    out = ppo_clip_loss(LossInputs(logprobs_BT=torch.tensor([[0.2, -0.25]]), old_logprobs_BT=torch.zeros(1, 2),
                                   advantages_BT=torch.tensor([[1.0, -1.0]]), loss_mask_BT=torch.ones(1, 2),
                                   clip_low=0.2, clip_high=0.28))
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[-math.exp(0.2), 0.8]]), atol=1e-5, rtol=0)


def test_dual_clip_caps_negative_advantage_loss():
    # A = -2, ratio e^2 = 7.389: PPO loss = -min(-14.78, -2.4) = 14.78; dual clip c = 3 caps it at
    # -c A = 6. A = -2, ratio e^0.5 = 1.6487: loss 3.297 < 6, unchanged. A = +1 is never dual-clipped.
    logp = torch.tensor([[2.0, 0.5, 2.0]])
    adv = torch.tensor([[-2.0, -2.0, 1.0]])
    out = ppo_clip_loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=torch.zeros(1, 3), advantages_BT=adv,
                                   loss_mask_BT=torch.ones(1, 3), clip_low=0.2, clip_high=0.2, dual_clip=3.0))
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[6.0, 2 * math.exp(0.5), -1.2]]), atol=1e-5, rtol=0)
    assert out.metrics["clip_dual_tokens"] == 1
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clip_loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=torch.zeros(1, 3), advantages_BT=adv,
                                 loss_mask_BT=torch.ones(1, 3), clip_low=0.2, clip_high=0.2, dual_clip=1.0))


def test_gspo_sequence_ratio_and_sequence_clipping():
    # row 0: sampled log-ratios 0.1 and 0.3 (col 1 masked, junk 5): s = exp(0.2) = 1.2214, A = +1,
    #   eps 0.2 -> the whole sequence is clipped at 1.2: loss -1.2 on both sampled tokens.
    # row 1: log-ratios -0.1, 0.1 -> s = 1, A = -1 -> loss +1 on both tokens.
    logp = torch.tensor([[0.1, 5.0, 0.3], [-0.1, 0.1, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 0, 1], [1, 1, 0.0]])
    adv = torch.tensor([[1.0, 0, 1.0], [-1.0, -1.0, 0]])
    out = gspo_loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=torch.zeros(2, 3), advantages_BT=adv, loss_mask_BT=mask,
                               clip_low=0.2, clip_high=0.2))
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[-1.2, 0, -1.2], [1.0, 1.0, 0]]), atol=1e-5, rtol=0)
    assert out.metrics["clip_high_tokens"] == 2  # both tokens of the clipped sequence
    # gradient: clipped row 0 has none; row 1: d(-s_it A)/d logp_t = -A s = +1 per token
    (grad,) = torch.autograd.grad(out.per_token_loss_BT.sum(), logp)
    torch.testing.assert_close(grad, torch.tensor([[0.0, 0, 0], [1.0, 1.0, 0]]))


def test_cispo_clipped_weight_keeps_every_token_in_the_gradient():
    # ratio e^0.5 = 1.6487 with eps_high 0.28 -> weight 1.28 (stop-gradient); A = 2, logp = 0.5 - 1 = -0.5:
    #   loss = -1.28 * 2 * (-0.5) = 1.28; gradient -w A = -2.56 (PPO would give 0: clipped token).
    # ratio e^-0.1 = 0.9048 inside [0.8, 1.28]: weight 0.9048; A = -1, logp = -1.1: loss = -0.9048 * 1.1 * 1
    logp = torch.tensor([[-0.5, -1.1]], requires_grad=True)
    old = torch.tensor([[-1.0, -1.0]])
    out = cispo_loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=old, advantages_BT=torch.tensor([[2.0, -1.0]]),
                                loss_mask_BT=torch.ones(1, 2), clip_low=0.2, clip_high=0.28))
    w = math.exp(-0.1)
    torch.testing.assert_close(out.per_token_loss_BT, torch.tensor([[1.28, -w * 1.1]]), atol=1e-5, rtol=0)
    (grad,) = torch.autograd.grad(out.per_token_loss_BT.sum(), logp)
    torch.testing.assert_close(grad, torch.tensor([[-2.56, w]]), atol=1e-5, rtol=0)
    assert out.metrics["clip_high_tokens"] == 1 and out.metrics["clip_low_tokens"] == 0


def test_registry_names():
    assert POLICY_LOSSES.names() == ["cispo", "gspo", "ppo_clip"]
