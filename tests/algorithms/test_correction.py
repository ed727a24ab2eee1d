"""Rollout correction on hand-made log-weights: each rule's weights, masks and counts by hand, the
identity when the sampler is the trainer, the sequence level GSPO uses, and the mismatch figures."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.algorithms.correction import ROLLOUT_CORRECTIONS, correct, mismatch

# Two rows; row 0 has 3 sampled tokens, row 1 has 2 (its third position is padding). The sampler's
# logprobs are the trainer's shifted by d, so log w = log pi_prox - log mu = -d.
PROX = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.2, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
LOG_W = torch.tensor([[0.1, math.log(3.0), -math.log(4.0)], [0.0, -0.05, 0.0]])
SAMPLER = (PROX - LOG_W) * MASK


def test_tis_truncates_each_weight_at_c():
    """w = (e^0.1, 3, 1/4; 1, e^-0.05): truncated at C = 2 the 3 becomes 2; one token clipped."""
    c = correct("tis", PROX, SAMPLER, MASK, 2.0, 0.001)
    want = torch.tensor([[math.exp(0.1), 2.0, 0.25], [1.0, math.exp(-0.05), 0.0]])
    torch.testing.assert_close(c.weights_BT, want, atol=1e-6, rtol=0)
    assert (c.clipped_tokens, c.masked_tokens, c.masked_sequences) == (1.0, 0.0, 0.0)


def test_mis_drops_the_tokens_outside_the_band():
    """Band [1/2, 2]: 3 and 1/4 are outside and weigh 0; the others keep their weight w."""
    c = correct("mis", PROX, SAMPLER, MASK, 2.0, 0.001)
    want = torch.tensor([[math.exp(0.1), 0.0, 0.0], [1.0, math.exp(-0.05), 0.0]])
    torch.testing.assert_close(c.weights_BT, want, atol=1e-6, rtol=0)
    assert (c.clipped_tokens, c.masked_tokens, c.masked_sequences) == (0.0, 2.0, 0.0)


def test_geo_mask_drops_whole_sequences_by_their_geometric_mean():
    """Row 0's mean log-weight (0.1 + log 3 - log 4) / 3 = -0.0626 leaves a band of 5% (log 1.05 =
    0.0488); row 1's -0.025 stays in it: row 0 weighs 0, row 1 weighs 1 on its tokens."""
    c = correct("geo_mask", PROX, SAMPLER, MASK, 2.0, 0.05)
    torch.testing.assert_close(c.weights_BT, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
    assert (c.masked_tokens, c.masked_sequences) == (3.0, 1.0)


def test_a_sequence_level_loss_gets_the_geometric_mean_weight_on_every_token():
    """GSPO's ratio is a sequence's; so is its tis weight: exp(mean log w) per row, truncated at C."""
    c = correct("tis", PROX, SAMPLER, MASK, 2.0, 0.001, sequence=True)
    row0 = math.exp((0.1 + math.log(3.0) - math.log(4.0)) / 3)
    row1 = math.exp(-0.05 / 2)
    torch.testing.assert_close(c.weights_BT, torch.tensor([[row0] * 3, [row1, row1, 0.0]]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ROLLOUT_CORRECTIONS.names())
def test_when_the_sampler_is_the_trainer_every_rule_is_the_identity(name):
    c = correct(name, PROX, PROX * MASK, MASK, 2.0, 0.001)
    torch.testing.assert_close(c.weights_BT, MASK)
    assert c.clipped_tokens == c.masked_tokens == c.masked_sequences == 0.0


def test_the_mismatch_figures_by_hand():
    """|log w| sums to 0.1 + log 3 + log 4 + 0 + 0.05 over 5 tokens, max log 4; the KL estimate sums
    w log w - w + 1 over them (0 where w = 1)."""
    m = mismatch(PROX, SAMPLER, MASK)
    ws = [math.exp(0.1), 3.0, 0.25, 1.0, math.exp(-0.05)]
    assert m.tokens == 5
    assert m.abs_sum == pytest.approx(0.1 + math.log(3) + math.log(4) + 0.05, abs=1e-6)
    assert m.abs_max == pytest.approx(math.log(4), abs=1e-6)
    assert m.kl_sum == pytest.approx(sum(w * math.log(w) - w + 1 for w in ws), abs=1e-6)
