"""Reward placement, reward-to-go and GAE: hand-computed numbers and slow per-row loop references."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs, dr_grpo_advantages
from agentic_rl.algorithms.returns import (
    gae,
    last_sampled_position,
    masked_mean_std,
    place_at,
    reward_to_go,
    turn_end_positions,
)


def test_gae_skips_observation_gap():
    # [obs, a, a, obs, obs, a]: sampled cols 1, 2, 5; V = 0.5, 0.4, 0.2 there (junk 7 at masked cols);
    # reward 1 at col 5; gamma 0.9, lam 0.8. The next value after col 2 is col 5's, not col 3's:
    #   col 5: delta = 1 - 0.2 = 0.8                    A = 0.8
    #   col 2: delta = 0.9 * 0.2 - 0.4 = -0.22          A = -0.22 + 0.72 * 0.8 = 0.356
    #   col 1: delta = 0.9 * 0.4 - 0.5 = -0.14          A = -0.14 + 0.72 * 0.356 = 0.11632
    # returns R = A + V = [0.61632, 0.756, 1.0]
    mask = torch.tensor([[0, 1, 1, 0, 0, 1.0]])
    values = torch.tensor([[7, 0.5, 0.4, 7, 7, 0.2]])
    rewards = torch.tensor([[0, 0, 0, 0, 0, 1.0]])
    adv, ret = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    torch.testing.assert_close(adv, torch.tensor([[0, 0.11632, 0.356, 0, 0, 0.8]]), atol=1e-6, rtol=0)
    torch.testing.assert_close(ret, torch.tensor([[0, 0.61632, 0.756, 0, 0, 1.0]]), atol=1e-6, rtol=0)


def test_gae_lambda_one_is_monte_carlo_and_lambda_zero_is_td():
    # lam = 1: A_t = G_t - V_t (discounted return minus value); lam = 0: A_t = r_t + gamma V_next - V_t.
    mask = torch.tensor([[1, 0, 1, 1.0]])
    values = torch.tensor([[0.3, 5.0, 0.1, 0.6]])
    rewards = torch.tensor([[0.0, 0.0, 0.5, 1.0]])
    adv, _ = gae(rewards, values, mask, gamma=0.5, lam=1.0)
    g = reward_to_go(rewards, mask, 0.5)  # [0.5 * 0.5 + 0.25 * 1, _, 0.5 + 0.5, 1] = [0.5, _, 1.0, 1.0]
    torch.testing.assert_close(g, torch.tensor([[0.5, 0, 1.0, 1.0]]))
    torch.testing.assert_close(adv, (g - values) * mask)
    adv0, _ = gae(rewards, values, mask, gamma=0.5, lam=0.0)
    # col 0: 0 + 0.5 * 0.1 - 0.3 = -0.25; col 2: 0.5 + 0.5 * 0.6 - 0.1 = 0.7; col 3: 1 - 0.6 = 0.4
    torch.testing.assert_close(adv0, torch.tensor([[-0.25, 0, 0.7, 0.4]]))


def test_positions_and_placement():
    mask = torch.tensor([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0.0]])
    turn = torch.tensor([[9, 0, 0, 9, 1], [0, 0, 0, 0, 0], [0, 5, 5, 5, 5]])
    assert last_sampled_position(mask).tolist() == [4, -1, 0]
    pos = turn_end_positions(mask, turn, 2)
    assert pos.tolist() == [[2, 4], [-1, -1], [0, -1]]
    placed = place_at(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), pos, 5)
    torch.testing.assert_close(placed, torch.tensor([[0, 0, 1.0, 0, 2.0], [0, 0, 0, 0, 0], [5.0, 0, 0, 0, 0]]))


def test_masked_mean_std():
    mean, std = masked_mean_std(torch.tensor([[1.0, 99.0, 3.0]]), torch.tensor([[1, 0, 1.0]]))
    assert float(mean) == 2.0 and float(std) == 1.0


# --- vectorized == slow loop reference ---------------------------------------------------------


def _loop_gae(rewards, values, mask, gamma, lam):
    """Per row: compact to the sampled tokens, run textbook GAE on that list, scatter back."""
    adv = torch.zeros_like(values)
    for b in range(mask.shape[0]):
        idx = [t for t in range(mask.shape[1]) if mask[b, t] > 0]
        running, next_v = 0.0, 0.0
        for t in reversed(idx):
            running = float(rewards[b, t]) + gamma * next_v - float(values[b, t]) + gamma * lam * running
            next_v = float(values[b, t])
            adv[b, t] = running
    return adv


rows = st.integers(1, 4).flatmap(
    lambda B: st.integers(1, 8).flatmap(
        lambda T: st.tuples(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=B, max_size=B),
                            st.integers(0, 2**16))
    )
)


@settings(max_examples=25, deadline=None)
@given(rows, st.sampled_from([1.0, 0.9]), st.sampled_from([1.0, 0.95, 0.0]))
def test_gae_equals_loop_reference(data, gamma, lam):
    mask_bits, seed = data
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor(mask_bits, dtype=torch.float32)
    rewards, values = torch.randn(mask.shape, generator=g), torch.randn(mask.shape, generator=g)
    adv, ret = gae(rewards, values, mask, gamma, lam)
    ref = _loop_gae(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(adv, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ret, (ref + values) * mask, atol=1e-5, rtol=1e-5)


def _loop_group_credit(rewards_PG, mask, turn, turn_rewards):
    """Dr. GRPO with process rewards written as loops: token in turn k of sample i gets
    (r_i - mean_G r) + sum over turns j >= k of (turn reward - the group's mean turn reward)."""
    P, G = rewards_PG.shape
    out = torch.zeros_like(mask)
    outcome = dr_grpo_advantages(rewards_PG).reshape(-1)
    for p in range(P):
        group = range(p * G, (p + 1) * G)
        turns = {b: sorted({int(turn[b, t]) for t in range(mask.shape[1]) if mask[b, t] > 0}) for b in group}
        pooled = [float(turn_rewards[b, k]) for b in group for k in turns[b]]
        base = sum(pooled) / len(pooled) if pooled else 0.0
        for b in group:
            for t in range(mask.shape[1]):
                if mask[b, t] > 0:
                    k = int(turn[b, t])
                    later = sum(float(turn_rewards[b, j]) - base for j in turns[b] if j >= k)
                    out[b, t] = float(outcome[b]) + later
    return out


@settings(max_examples=25, deadline=None)
@given(rows, st.integers(1, 3), st.lists(st.sampled_from([0.0, 1.0]), min_size=4, max_size=4))
def test_group_credit_equals_loop_reference(data, K, outcome):
    mask_bits, seed = data
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor(mask_bits, dtype=torch.float32)
    B, T = mask.shape
    turn = torch.randint(0, 2, (B, T), generator=g).cumsum(1).clamp(max=K - 1)
    turn_rewards = torch.rand(B, K, generator=g)
    rewards_PG = torch.tensor(outcome[:B]).reshape(1, B)
    x = AdvantageInputs(rewards_PG, mask, turn, turn_rewards)
    adv = ADVANTAGE_ESTIMATORS.get("dr_grpo")(x).advantages_BT
    torch.testing.assert_close(adv, _loop_group_credit(rewards_PG, mask, turn, turn_rewards), atol=1e-5, rtol=1e-5)
