"""What a held-out figure is worth: pass@k and bootstrap confidence intervals.

A 100-task split measures an accuracy of 0.5 to about ±0.1 at 95%: a difference between two runs
smaller than that is not shown by one evaluation. Every accuracy `agentic-rl eval` writes carries
its interval, computed here by resampling tasks (the unit that varies between evaluations).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LEVEL = 0.95  # two-sided
RESAMPLES = 2000


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one task from n samples of which c are correct (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code"): 1 - C(n-c, k) / C(n, k), the chance that k
    of the n samples drawn without replacement hold a correct one."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_ci(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-task `values` (resampling tasks)."""
    return mean_of_means_ci([values], seed)


def mean_of_means_ci(parts: Sequence[Sequence[float]], seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the parts' means (each part resampled on its
    own: a run's overall accuracy is the mean of its splits' accuracies)."""
    parts = [np.asarray(p, dtype=np.float64) for p in parts if len(p)]
    if not parts:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = np.mean([p[rng.integers(0, len(p), (RESAMPLES, len(p)))].mean(axis=1) for p in parts], axis=0)
    lo, hi = np.quantile(means, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return (round(float(lo), 4), round(float(hi), 4))


# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom 1..30
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t: the table to 30 degrees of freedom, then the Cornish-Fisher
    expansion (within 1e-3 of the exact value from 30 on)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


ACCURACY = (0.0, 1.0)  # the range an accuracy cannot leave: where `seed_interval` cuts its interval


def seed_interval(values: Sequence[float], within: tuple[float, float] | None = None) -> tuple[float, float]:
    """The 95% interval of a mean over seeds (Student's t with n - 1 degrees of freedom): the seed
    noise of a learning figure; a point when there is one seed. `within`: the range the quantity
    cannot leave (an accuracy's [0, 1]), where the interval is cut."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2:
        return (float(x.mean()), float(x.mean())) if len(x) else (0.0, 0.0)
    half = t975(len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    lo, hi = float(x.mean() - half), float(x.mean() + half)
    if within is not None:
        lo, hi = max(lo, within[0]), min(hi, within[1])
    return (round(lo, 4), round(hi, 4))
