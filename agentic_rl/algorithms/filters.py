"""Group filters: which scored groups of a step train.

DAPO's dynamic sampling (`dapo.dynamic_sampling_keep`) drops the groups whose rewards are all equal
and refills the step; StarPO-S's variance filter (RAGEN, Wang et al. 2025) keeps a fraction of the
groups, those with the most reward spread. Both act on the groups' rewards only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from agentic_rl.types import TrajectoryGroup


def keep_top_spread(groups: Sequence[TrajectoryGroup], keep: float) -> list[TrajectoryGroup]:
    """StarPO-S variance filtering: the `keep` fraction of groups with the highest reward std (at
    least one), in their original order."""
    if keep >= 1.0 or not groups:
        return list(groups)
    n = max(1, round(keep * len(groups)))
    spread = [statistics.pstdev(g.rewards) if len(g.rewards) > 1 else 0.0 for g in groups]
    chosen = sorted(sorted(range(len(groups)), key=lambda i: -spread[i])[:n])
    return [groups[i] for i in chosen]
