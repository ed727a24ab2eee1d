"""Advantage estimators against hand-computed numbers (outcome kernels and the token-level API)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGES, AdvantageInputs


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


@pytest.mark.parametrize("kernel", ["grpo", "dr_grpo", "rloo"])
@given(value=st.floats(-10, 10, width=32), size=st.integers(1, 16))
def test_equal_rewards_give_exactly_zero(kernel, value, size):
    """A group of equal rewards has advantage exactly 0, not a rounding error the std division
    blows up: eight rewards of 0.1 (the calculator's format-only reward) averaged to 0.1 + 7e-9 in
    float32 and GRPO gave them 0.0074 each, so the trainer took the group for one with signal.
    The second group has spread, so the kernels' work is not skipped for the whole batch."""
    rewards = torch.tensor([[value] * size, [0.0] * (size - 1) + [1.0]])
    adv = ADVANTAGES.get(kernel)(rewards)
    assert torch.equal(adv[0], torch.zeros(size))
    assert size == 1 or bool(adv[1].any())


def test_format_only_group_of_eight_is_flat_for_the_estimators():
    # the case seen in the recipe's runs: a group of eight wrong but well-formatted answers
    mask = torch.ones(8, 3)
    for name in ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"]:
        out = ADVANTAGE_ESTIMATORS.get(name)(AdvantageInputs(torch.full((1, 8), 0.1), mask))
        assert torch.equal(out.advantages_BT, torch.zeros(8, 3)), name


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


# --- the token-level API: AdvantageInputs -> AdvantageOutputs -------------------------------------

# Two samples of one task. Row 0: [prompt, a, a, obs, a], turn 0 = cols 1-2, turn 1 = col 4.
# Row 1: [prompt, a, pad, pad, pad], one turn. Outcome rewards [1, 0].
MASK = torch.tensor([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0]], dtype=torch.float32)
TURN = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]])


def _run(name, **kw):
    x = AdvantageInputs(torch.tensor([[1.0, 0.0]]), MASK, TURN, **kw)
    out = ADVANTAGE_ESTIMATORS.get(name)(x)
    assert out.advantages_BT.shape == MASK.shape
    return out


def test_token_grpo_broadcasts_on_sampled_tokens_only():
    # mean 0.5, unbiased std of [1, 0] = 0.707107 -> A = ±0.707106 on sampled tokens, 0 elsewhere
    a = 0.5 / 0.7071068
    expected = torch.tensor([[0, a, a, 0, a], [0, -a, 0, 0, 0]])
    torch.testing.assert_close(_run("grpo").advantages_BT, expected, atol=1e-5, rtol=0)
    # scale "none" is Dr. GRPO: ±0.5; RLOO: r_i - r_other = ±1
    torch.testing.assert_close(_run("grpo", scale="none").advantages_BT, expected / a * 0.5, atol=1e-5, rtol=0)
    torch.testing.assert_close(_run("dr_grpo").advantages_BT, expected / a * 0.5, atol=1e-5, rtol=0)
    torch.testing.assert_close(_run("rloo").advantages_BT, expected / a, atol=1e-5, rtol=0)


def test_grpo_with_scale_none_divides_by_nothing():
    # scale "none" is Dr. GRPO exactly: r_i - mean_G r, with no eps in a divisor that is not a std
    # ([1, 0] -> ±0.5, exact in float32; divided by 1 + 1e-6 it reads 0.4999995)
    torch.testing.assert_close(_run("grpo", scale="none").advantages_BT, _run("dr_grpo").advantages_BT, atol=0, rtol=0)
    assert _run("grpo", scale="none").advantages_BT[0, 1].item() == 0.5


def test_grpo_batch_scale():
    # rewards [[1, 0], [1, 1]]: centred per group [0.5, -0.5], [0, 0];
    # batch std of [1, 0, 1, 1]: mean 0.75, unbiased var = (3 * 0.0625 + 0.5625) / 3 = 0.25 -> std 0.5
    # A = [1, -1], [0, 0]
    x = AdvantageInputs(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.ones(4, 1), scale="batch")
    adv = ADVANTAGE_ESTIMATORS.get("grpo")(x).advantages_BT
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.0, -1.0, 0.0, 0.0]), atol=1e-5, rtol=0)


def test_per_turn_rewards_credit_their_turn_and_earlier_ones():
    # turn rewards: row 0 [0.2, 0.6], row 1 [0.4, (no turn 1)]. Group mean over existing turns:
    # (0.2 + 0.6 + 0.4) / 3 = 0.4 -> centred row 0 [-0.2, 0.2], row 1 [0.0].
    # Reward-to-go over turns (gamma 1): row 0 turn 0: -0.2 + 0.2 = 0; turn 1: 0.2; row 1: 0.
    # Dr. GRPO outcome part ±0.5 -> row 0 [0.5, 0.5, _, 0.7], row 1 [-0.5].
    out = _run("dr_grpo", turn_rewards_BK=torch.tensor([[0.2, 0.6], [0.4, 9.0]]))
    expected = torch.tensor([[0, 0.5, 0.5, 0, 0.7], [0, -0.5, 0, 0, 0]])
    torch.testing.assert_close(out.advantages_BT, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
@given(value=st.floats(-1, 1, width=32), size=st.integers(2, 16))
def test_equal_turn_rewards_give_exactly_zero(name, value, size):
    """A group whose outcomes are equal and whose existing turns all got the same process reward
    has no signal: its advantages are exactly 0 (the trainer drops it by that test), not the
    residue of a float mean (0.1 over eight turns averages to 0.1 + 7e-9). Row 0 has two turns,
    the others one; the missing turn's reward (9.0) must not count."""
    mask = torch.tensor([[0, 1, 0, 1]] + [[0, 1, 0, 0]] * (size - 1), dtype=torch.float32)
    turn = torch.tensor([[0, 0, 1, 1]] * size)
    turn_rewards = torch.tensor([[value, value]] + [[value, 9.0]] * (size - 1))
    x = AdvantageInputs(torch.full((1, size), 0.1), mask, turn, turn_rewards_BK=turn_rewards)
    assert torch.equal(ADVANTAGE_ESTIMATORS.get(name)(x).advantages_BT, torch.zeros(size, 4))


def test_reinforce_pp_global_normalization():
    # gamma 1, no dense rewards: token returns = outcome: row 0 tokens [1, 1, 1], row 1 [0].
    # Over the 4 sampled tokens: mean 0.75, population std sqrt(3 * 0.0625 + 0.5625) / 2 = 0.433013
    # A = 0.25 / 0.433013 = 0.577350 and -0.75 / 0.433013 = -1.732051
    out = _run("reinforce_pp")
    a, b = 0.577350, -1.732051
    torch.testing.assert_close(out.advantages_BT, torch.tensor([[0, a, a, 0, a], [0, b, 0, 0, 0]]), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.returns_BT, MASK * torch.tensor([[1.0], [0.0]]))


def test_reinforce_pp_discounts_over_sampled_tokens_only():
    # gamma 0.5: row 0 return at its 3 sampled tokens (the obs column does not count) = [0.25, 0.5, 1]
    out = _run("reinforce_pp", gamma=0.5)
    torch.testing.assert_close(out.returns_BT[0], torch.tensor([0, 0.25, 0.5, 0, 1.0]))


def test_reinforce_pp_baseline():
    # group-centred [0.5 x3 tokens], [-0.5 x1]; token mean 0.25, population std
    # sqrt((3 * 0.0625 + 0.5625) / 4) = 0.433013; A = 0.5 / 0.433013 = 1.154701 (no re-centring)
    a = 0.5 / 0.4330127
    out = _run("reinforce_pp_baseline")
    torch.testing.assert_close(out.advantages_BT, torch.tensor([[0, a, a, 0, a], [0, -a, 0, 0, 0]]), atol=1e-5, rtol=0)


def test_gae_estimator_returns_with_turn_reward():
    # Row 0 only matters here; values V at cols 1, 2, 4 = 0.5, 0.4, 0.2 (junk 100 at masked cols).
    # token rewards: turn 0 reward 0.5 at col 2 (turn 0's last sampled token), outcome 1 at col 4.
    # gamma 0.9, lam 0.8 (gamma*lam = 0.72), the obs column is skipped:
    #   col 4: delta = 1 - 0.2 = 0.8;                         A = 0.8,              R = 1.0
    #   col 2: delta = 0.5 + 0.9 * 0.2 - 0.4 = 0.28;          A = 0.28 + 0.576 = 0.856, R = 1.256
    #   col 1: delta = 0 + 0.9 * 0.4 - 0.5 = -0.14;           A = -0.14 + 0.72 * 0.856 = 0.47632, R = 0.97632
    # Row 1: single token, V 0.3, reward 0: A = -0.3, R = 0.
    values = torch.tensor([[100, 0.5, 0.4, 100, 0.2], [100, 0.3, 100, 100, 100]])
    out = _run("gae", values_BT=values, turn_rewards_BK=torch.tensor([[0.5, 0.0], [0.0, 0.0]]), gamma=0.9, lam=0.8)
    torch.testing.assert_close(out.returns_BT, torch.tensor([[0, 0.97632, 1.256, 0, 1.0], [0, 0, 0, 0, 0]]),
                               atol=1e-5, rtol=0)
    # advantages are whitened: raw [0.47632, 0.856, 0.8, -0.3] -> mean 0 / std 1 over sampled tokens
    raw = torch.tensor([0.47632, 0.856, 0.8, -0.3])
    adv = out.advantages_BT[MASK.bool()]
    torch.testing.assert_close(adv, (raw - raw.mean()) / (raw.std(unbiased=False) + 1e-6), atol=1e-5, rtol=0)


def test_gae_needs_values_and_turn_rewards_need_turns():
    with pytest.raises(ValueError, match="values_BT"):
        _run("gae")
    with pytest.raises(ValueError, match="turn_index_BT"):
        AdvantageInputs(torch.zeros(1, 2), MASK, turn_rewards_BK=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="rows"):
        AdvantageInputs(torch.zeros(1, 3), MASK)
    with pytest.raises(KeyError, match="known: batch, group, none"):
        _run("grpo", scale="sequence")
