"""pass@k and the intervals, against independent computations."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from agentic_rl.monitor.intervals import bootstrap_ci, mean_of_means_ci, pass_at_k, seed_interval, t975


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 2), (5, 2, 4), (6, 3, 3), (4, 4, 2), (7, 1, 7)])
def test_pass_at_k_is_the_chance_that_k_of_the_n_samples_hold_a_correct_one(n, c, k):
    """Enumerate every k-subset of n samples (c of them correct): the share holding a correct one."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)  # pass@1 is the mean


def test_pass_at_k_refuses_what_it_cannot_estimate():
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_the_bootstrap_interval_of_a_coin_matches_the_normal_interval():
    """100 tasks, 50 right: the mean's standard error is sqrt(0.25 / 100) = 0.05, so the normal 95%
    interval is 0.5 ± 0.098. The percentile bootstrap agrees within 0.015 at each end."""
    lo, hi = bootstrap_ci([1.0] * 50 + [0.0] * 50)
    assert lo == pytest.approx(0.5 - 1.96 * 0.05, abs=0.015) and hi == pytest.approx(0.5 + 1.96 * 0.05, abs=0.015)
    assert bootstrap_ci([1.0] * 20) == (1.0, 1.0)  # no spread, no width


def test_the_overall_interval_resamples_each_split_on_its_own():
    """Two splits of 100 at 0.9 and 0.1: the overall mean 0.5 has standard error
    sqrt(0.09/100 + 0.09/100) / 2 = 0.0212, so ±0.042 (a pooled resample of all 200 tasks would give
    ±0.069, as the spread between the splits would count as noise)."""
    a, b = [1.0] * 90 + [0.0] * 10, [1.0] * 10 + [0.0] * 90
    lo, hi = mean_of_means_ci([a, b])
    assert (hi - lo) / 2 == pytest.approx(1.96 * math.sqrt(0.09 / 100 + 0.09 / 100) / 2, abs=0.006)


def test_the_seed_interval_is_students_t():
    """Seeds 0.5, 0.6, 0.7: mean 0.6, sd 0.1, t(2) = 4.303, half width 4.303 * 0.1 / sqrt(3) = 0.2484."""
    assert seed_interval([0.5, 0.6, 0.7]) == pytest.approx((0.6 - 0.2484, 0.6 + 0.2484), abs=1e-4)
    assert seed_interval([0.4]) == (0.4, 0.4)
    # 0.9, 1.0, 1.0: mean 0.9667, sd 0.0577, half 4.303 x 0.0577 / sqrt(3) = 0.1434; an accuracy stops at 1
    assert seed_interval([0.9, 1.0, 1.0], (0.0, 1.0)) == pytest.approx((0.9667 - 0.1434, 1.0), abs=1e-4)
    assert seed_interval([0.9, 1.0, 1.0])[1] == pytest.approx(0.9667 + 0.1434, abs=1e-4)


def test_t_quantiles_past_the_table_are_within_a_thousandth():
    """Exact 0.975 quantiles: 40 -> 2.0211, 60 -> 2.0003, 120 -> 1.9799; the expansion at 30 meets the table."""
    for df, exact in ((40, 2.0211), (60, 2.0003), (120, 1.9799)):
        assert t975(df) == pytest.approx(exact, abs=1e-3)
    assert t975(31) < t975(30) and abs(t975(31) - 2.040) < 1e-3


def test_the_bootstrap_covers_the_truth_about_95_percent_of_the_time():
    """400 evaluations of 60 tasks drawn at p = 0.7: the interval holds 0.7 in 91-98% of them."""
    rng = random.Random(1)
    hits = sum(lo <= 0.7 <= hi for lo, hi in (bootstrap_ci([float(rng.random() < 0.7) for _ in range(60)], seed=i)
                                              for i in range(400)))
    assert 0.91 <= hits / 400 <= 0.98
