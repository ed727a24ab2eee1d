"""Property harness over EVERY registered (advantage estimator, policy loss, aggregation) combination.

Each hypothesis example is a small multi-turn batch: P tasks x G samples, rows of T positions whose
loss mask interleaves sampled tokens with observations/padding, turns, outcome rewards drawn from
{0, 0.1, 0.5, 1} (so equal-reward groups are common, and 0.1 has no exact float mean), optional per-turn rewards and dense token rewards,
critic values, current and old logprobs. The pipeline is the one the trainer runs:
advantages (whole batch) -> policy loss -> aggregation with a whole-batch normalizer -> gradient.

Proven for every combination:
  (a) garbage at masked positions (logprobs, old logprobs, values, dense rewards, turn indices)
      changes neither advantages nor loss nor the gradient at sampled positions;
  (b) the gradient at masked positions is exactly 0;
  (c) micro-batches (any split of the rows) sum to the full-batch loss and gradient;
  (d) at ratio 1 every policy loss has the vanilla policy gradient (A > 0 raises logp);
  (e) a group whose rewards are all equal gets zero advantage from group-based estimators;
  (f) inserting observation columns anywhere changes no sampled token's advantage, loss or gradient.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, SCALES, AdvantageInputs
from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.losses import POLICY_LOSSES, LossInputs

COMBOS = list(itertools.product(ADVANTAGE_ESTIMATORS.names(), POLICY_LOSSES.names(), AGGREGATIONS.names()))
GROUP_BASED = {"grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"}
NOT_GROUP_BASED = {"reinforce_pp", "gae"}  # global baseline / critic: an equal group may get credit
MAX_LEN = 12  # the seq-mean-token-sum-norm budget; >= any T drawn below
WHITENED = ("reinforce_pp", "reinforce_pp_baseline")  # divide by the std of the whole batch
SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Case:
    adv_in: AdvantageInputs
    logp_BT: torch.Tensor
    old_BT: torch.Tensor
    clip: tuple[float, float]
    seed: int


@st.composite
def cases(draw) -> Case:
    P, G, T = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(2, 9))
    B, K = P * G, draw(st.integers(1, 3))
    mask = draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=B, max_size=B))
    steps = draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=B, max_size=B))
    rewards = draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0]), min_size=B, max_size=B))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    mask_BT = torch.tensor(mask, dtype=torch.float32)
    turn_BT = torch.tensor(steps, dtype=torch.long).cumsum(1).clamp(max=K - 1)
    adv_in = AdvantageInputs(
        rewards_PG=torch.tensor(rewards).reshape(P, G),
        loss_mask_BT=mask_BT,
        turn_index_BT=turn_BT,
        turn_rewards_BK=torch.rand(B, K, generator=g) if draw(st.booleans()) else None,
        token_rewards_BT=-0.1 * torch.rand(B, T, generator=g) if draw(st.booleans()) else None,
        values_BT=torch.randn(B, T, generator=g),
        scale=draw(st.sampled_from(SCALES.names())),
        gamma=draw(st.sampled_from([1.0, 0.9])),
        lam=draw(st.sampled_from([1.0, 0.95])),
    )
    logp = -torch.rand(B, T, generator=g) * 2
    old = logp + torch.randn(B, T, generator=g) * 0.3
    clip = draw(st.sampled_from([(0.2, 0.2), (0.2, 0.28), (3e-4, 4e-4)]))
    return Case(adv_in, logp, old, clip, seed)


def advantages(case: Case, estimator: str) -> torch.Tensor:
    return ADVANTAGE_ESTIMATORS.get(estimator)(case.adv_in).advantages_BT


def loss_and_grad(case: Case, adv_BT, loss: str, agg: str, rows=None, norm=None):
    """Aggregated loss over `rows` (default all) and d loss / d logp over the whole batch."""
    mask = case.adv_in.loss_mask_BT
    rows = slice(None) if rows is None else rows
    norm = AGGREGATIONS.get(agg).normalizer(mask.sum(1), MAX_LEN) if norm is None else norm
    logp = case.logp_BT.clone().requires_grad_()
    x = LossInputs(logprobs_BT=logp[rows], old_logprobs_BT=case.old_BT[rows], advantages_BT=adv_BT[rows],
                   loss_mask_BT=mask[rows], clip_low=case.clip[0], clip_high=case.clip[1])
    out = POLICY_LOSSES.get(loss)(x)
    value = AGGREGATIONS.get(agg)(out.per_token_loss_BT, mask[rows], norm)
    (grad,) = torch.autograd.grad(value, logp, allow_unused=True)
    return value.detach(), torch.zeros_like(logp) if grad is None else grad


def with_garbage(case: Case) -> Case:
    """Same case with large random junk everywhere the loss mask is 0."""
    g = torch.Generator().manual_seed(case.seed + 1)
    a = case.adv_in
    off = 1 - a.loss_mask_BT
    junk = lambda: torch.randn(a.loss_mask_BT.shape, generator=g) * 50 * off  # noqa: E731
    adv_in = replace(
        a,
        values_BT=a.values_BT + junk(),
        token_rewards_BT=None if a.token_rewards_BT is None else a.token_rewards_BT + junk(),
        turn_index_BT=torch.where(off.bool(), torch.randint(-5, 99, off.shape, generator=g), a.turn_index_BT),
    )
    return replace(case, adv_in=adv_in, logp_BT=case.logp_BT + junk(), old_BT=case.old_BT + junk())


def test_every_estimator_is_classified():
    assert set(ADVANTAGE_ESTIMATORS.names()) == GROUP_BASED | NOT_GROUP_BASED


@pytest.mark.parametrize("estimator,loss,agg", COMBOS)
@SETTINGS
@given(case=cases())
def test_masked_positions_change_nothing(estimator, loss, agg, case):
    """(a) + (b)."""
    adv = advantages(case, estimator)
    dirty = with_garbage(case)
    adv2 = advantages(dirty, estimator)
    torch.testing.assert_close(adv2, adv)
    assert torch.all(adv[case.adv_in.loss_mask_BT == 0] == 0)
    value, grad = loss_and_grad(case, adv, loss, agg)
    value2, grad2 = loss_and_grad(dirty, adv2, loss, agg)
    torch.testing.assert_close(value2, value)
    torch.testing.assert_close(grad2, grad)  # equal at sampled positions, and both 0 elsewhere
    assert torch.all(grad2[case.adv_in.loss_mask_BT == 0] == 0)


@pytest.mark.parametrize("estimator,loss,agg", COMBOS)
@SETTINGS
@given(case=cases(), cuts=st.lists(st.integers(1, 11), max_size=4))
def test_micro_batches_sum_to_the_batch(estimator, loss, agg, case, cuts):
    """(c): advantages and the normalizer come from the whole batch; the loss is split by rows."""
    adv = advantages(case, estimator)
    B = adv.shape[0]
    norm = AGGREGATIONS.get(agg).normalizer(case.adv_in.loss_mask_BT.sum(1), MAX_LEN)
    whole, whole_grad = loss_and_grad(case, adv, loss, agg, norm=norm)
    bounds = sorted({0, B, *(c for c in cuts if c < B)})
    total, total_grad = torch.zeros(()), torch.zeros_like(whole_grad)
    for i, j in itertools.pairwise(bounds):
        part, part_grad = loss_and_grad(case, adv, loss, agg, rows=slice(i, j), norm=norm)
        total, total_grad = total + part, total_grad + part_grad
    torch.testing.assert_close(total, whole, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(total_grad, whole_grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("estimator,loss,agg", COMBOS)
@SETTINGS
@given(case=cases())
def test_ratio_one_is_the_vanilla_policy_gradient(estimator, loss, agg, case):
    """(d): with old = logp, d loss/d logp_t equals that of the REINFORCE loss -A_t logp_t."""
    case = replace(case, old_BT=case.logp_BT.clone())
    adv = advantages(case, estimator)
    mask = case.adv_in.loss_mask_BT
    _, grad = loss_and_grad(case, adv, loss, agg)
    norm = AGGREGATIONS.get(agg).normalizer(mask.sum(1), MAX_LEN)
    logp = case.logp_BT.clone().requires_grad_()
    (vanilla,) = torch.autograd.grad(AGGREGATIONS.get(agg)(-adv * logp, mask, norm), logp)
    torch.testing.assert_close(grad, vanilla, atol=1e-6, rtol=1e-5)
    sampled = mask.bool() & (adv.abs() > 1e-6)
    assert torch.all(torch.sign(grad[sampled]) == -torch.sign(adv[sampled]))  # descent raises logp iff A > 0


@pytest.mark.parametrize("estimator", sorted(GROUP_BASED))
@SETTINGS
@given(case=cases())
def test_equal_reward_group_gets_zero_advantage(estimator, case):
    """(e): without process rewards, a group with one reward value has nothing to learn from."""
    case = replace(case, adv_in=replace(case.adv_in, turn_rewards_BK=None, token_rewards_BT=None))
    r = case.adv_in.rewards_PG
    adv = advantages(case, estimator).reshape(r.shape[0], r.shape[1], -1)
    equal = (r == r[:, :1]).all(1)
    assert torch.all(adv[equal] == 0)


def insert_observations(case: Case, cols: list[int]) -> tuple[Case, torch.Tensor]:
    """Insert a masked column (with junk values) before each original position in `cols`."""
    T = case.logp_BT.shape[1]
    order = sorted([(c, 0, c) for c in range(T)] + [(c, -1, -1) for c in cols])
    new = torch.tensor([src < 0 for _, _, src in order])
    src = torch.tensor([max(s, 0) for _, _, s in order])
    g = torch.Generator().manual_seed(case.seed + 2)

    def widen(x, fill_mask=False):
        if x is None:
            return None
        junk = torch.randint(0, 3, x.shape[:1] + new.shape, generator=g).to(x.dtype)
        return torch.where(new, torch.zeros_like(junk) if fill_mask else junk, x[:, src])

    a = case.adv_in
    adv_in = replace(
        a, loss_mask_BT=widen(a.loss_mask_BT, fill_mask=True), turn_index_BT=widen(a.turn_index_BT),
        values_BT=widen(a.values_BT), token_rewards_BT=widen(a.token_rewards_BT),
    )
    return replace(case, adv_in=adv_in, logp_BT=widen(case.logp_BT), old_BT=widen(case.old_BT)), ~new


@pytest.mark.parametrize("estimator,loss,agg", COMBOS)
@SETTINGS
@given(case=cases(), cols=st.lists(st.integers(0, 8), min_size=1, max_size=4))
def test_observation_columns_change_no_credit(estimator, loss, agg, case, cols):
    """(f): a multi-turn row with tool observations gets the same per-token credit as the same
    sampled tokens with the observations removed (the reward-to-go-at-tool-tokens bug class)."""
    # Equal rewards all over the batch give zero advantages up to float rounding, which the batch
    # whitening of REINFORCE++ then divides by a std of ~1e-8: noise that depends on the summation
    # order of the wider tensors. Such a batch carries no credit to compare, so it is left out.
    assume(estimator not in WHITENED or len(set(case.adv_in.rewards_PG.flatten().tolist())) > 1)
    wide, kept = insert_observations(case, [c for c in cols if c < case.logp_BT.shape[1]])
    adv, adv_wide = advantages(case, estimator), advantages(wide, estimator)
    # Whitening divides by the batch std, which amplifies float32 summation-order rounding (the
    # wider tensors sum in a different order) when the returns barely differ: absolute 1e-4.
    torch.testing.assert_close(adv_wide[:, kept], adv, atol=1e-4, rtol=1e-4)
    adv_wide[:, kept] = adv  # compare the losses on identical advantages
    value, grad = loss_and_grad(case, adv, loss, agg)
    value_wide, grad_wide = loss_and_grad(wide, adv_wide, loss, agg)
    torch.testing.assert_close(value_wide, value)
    torch.testing.assert_close(grad_wide[:, kept], grad)
