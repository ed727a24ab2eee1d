"""Advantage estimators against hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.advantages import ADVANTAGES


def test_grpo_hand_computed():
    # rewards [1, 0, 0, 1]: mean 0.5; unbiased std = sqrt(4 * 0.25 / 3) = 0.57735
    # A = ±0.5 / 0.57735 = ±0.866025
    adv = ADVANTAGES.get("grpo")(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.866025, -0.866025, -0.866025, 0.866025]]), atol=1e-5, rtol=0)


def test_grpo_second_group_and_zero_variance():
    # group 2: rewards [1, 0.1, 0.1]: mean 0.4; deviations [0.6, -0.3, -0.3];
    # unbiased var = (0.36 + 0.09 + 0.09) / 2 = 0.27, std = 0.519615 -> A = [1.154701, -0.577350, -0.577350]
    adv = ADVANTAGES.get("grpo")(torch.tensor([[0.5, 0.5, 0.5], [1.0, 0.1, 0.1]]))
    torch.testing.assert_close(adv[0], torch.zeros(3))  # no spread, no signal
    torch.testing.assert_close(adv[1], torch.tensor([1.154701, -0.577350, -0.577350]), atol=1e-5, rtol=0)


def test_dr_grpo_and_rloo():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    torch.testing.assert_close(ADVANTAGES.get("dr_grpo")(r), torch.tensor([[0.5, -0.5, -0.5, 0.5]]))
    # RLOO: r_i - mean of the others: 1 - 1/3 = 0.666667, 0 - 2/3 = -0.666667
    torch.testing.assert_close(ADVANTAGES.get("rloo")(r), torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3]]))


def test_registry_errors():
    with pytest.raises(KeyError, match="known: dr_grpo, grpo, rloo"):
        ADVANTAGES.get("nope")
    with pytest.raises(ValueError, match="already registered"):
        ADVANTAGES.register("grpo")(lambda r: r)
