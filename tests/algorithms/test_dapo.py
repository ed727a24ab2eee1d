"""DAPO's dynamic sampling filter, overlong shaping and truncation mask."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.dapo import dynamic_sampling_keep, mask_truncated, overlong_penalty


def test_dynamic_sampling_keeps_groups_with_reward_spread():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.5001]])
    assert dynamic_sampling_keep(rewards).tolist() == [False, True, False, True]
    assert dynamic_sampling_keep(rewards, tol=1e-3).tolist() == [False, True, False, False]


def test_overlong_penalty_is_a_linear_ramp_in_the_cache():
    # L_max 20, L_cache 4: free up to 16; |y| = 18 -> (16 - 18) / 4 = -0.5; 20 -> -1; 25 -> -1
    lengths = torch.tensor([10, 16, 17, 18, 20, 25])
    expected = torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    torch.testing.assert_close(overlong_penalty(lengths, max_len=20, cache_len=4), expected)
    torch.testing.assert_close(overlong_penalty(lengths, 20, 4, factor=0.5), expected * 0.5)
    with pytest.raises(ValueError):
        overlong_penalty(lengths, max_len=20, cache_len=0)


def test_mask_truncated_zeroes_truncated_rows():
    mask = torch.tensor([[0, 1, 1.0], [1, 1, 0.0]])
    out = mask_truncated(mask, torch.tensor([False, True]))
    torch.testing.assert_close(out, torch.tensor([[0, 1, 1.0], [0, 0, 0.0]]))
