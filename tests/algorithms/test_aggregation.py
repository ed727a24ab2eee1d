"""Aggregations and their whole-batch normalizers against hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.aggregation import AGGREGATIONS, batch_normalizer

# row 0: 3 sampled tokens with loss [1, 2, 3]; row 1: 1 sampled token with loss 4; 9s are masked junk
LOSS = torch.tensor([[1.0, 2.0, 9.0, 3.0], [4.0, 9.0, 9.0, 9.0]])
MASK = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0.0]])


def test_hand_computed():
    # token-mean: (1 + 2 + 3 + 4) / 4 tokens = 2.5
    # seq-mean-token-mean: (mean(1, 2, 3) + 4) / 2 sequences = (2 + 4) / 2 = 3
    # seq-mean-token-sum-norm, L_max 5: (6 / 5 + 4 / 5) / 2 = 1.0
    expected = {"token-mean": 2.5, "seq-mean-token-mean": 3.0, "seq-mean-token-sum-norm": 1.0}
    for name, value in expected.items():
        norm = batch_normalizer(name, MASK, max_len=5)
        assert float(AGGREGATIONS[name](LOSS, MASK, norm)) == pytest.approx(value)


def test_normalizers_come_from_sequence_token_counts():
    counts = [3, 1]
    assert AGGREGATIONS.get("token-mean").normalizer(counts, None) == 4
    assert AGGREGATIONS.get("seq-mean-token-mean").normalizer(counts, None) == 2
    assert AGGREGATIONS.get("seq-mean-token-sum-norm").normalizer(counts, 5) == 10
    with pytest.raises(ValueError, match="max_len"):
        AGGREGATIONS.get("seq-mean-token-sum-norm").normalizer(counts, None)


def test_inf_at_masked_positions_does_not_leak():
    loss = LOSS.clone()
    loss[0, 2] = float("inf")
    for name in AGGREGATIONS:
        assert torch.isfinite(AGGREGATIONS[name](loss, MASK, batch_normalizer(name, MASK, max_len=5)))


def test_registry_behaviour():
    assert list(AGGREGATIONS) == ["seq-mean-token-mean", "seq-mean-token-sum-norm", "token-mean"]
    assert "token-mean" in AGGREGATIONS
    with pytest.raises(KeyError, match="known: seq-mean-token-mean"):
        AGGREGATIONS["token-sum"]
