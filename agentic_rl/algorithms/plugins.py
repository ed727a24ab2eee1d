"""Third-party algorithms from installed packages: one entry-point group per registry.

A package adds, e.g., in its pyproject.toml

    [project.entry-points."agentic_rl.advantages"]
    my_estimator = "my_pkg.credit:my_estimator"

and a recipe can then say `rl.algorithm.advantage: my_estimator`. Groups are loaded once, when a recipe is
checked, never at import time.
"""

from __future__ import annotations

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS
from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.kl import KL_ESTIMATORS, KL_LOSSES
from agentic_rl.algorithms.losses import POLICY_LOSSES

GROUPS = {
    "agentic_rl.advantages": ADVANTAGE_ESTIMATORS,
    "agentic_rl.policy_losses": POLICY_LOSSES,
    "agentic_rl.aggregations": AGGREGATIONS,
    "agentic_rl.kl_estimators": KL_ESTIMATORS,
    "agentic_rl.kl_losses": KL_LOSSES,
}
_loaded: set[str] = set()


def load_plugins() -> None:
    for group, registry in GROUPS.items():
        if group not in _loaded:
            _loaded.add(group)
            registry.load_entry_points(group)
