"""The reward-hacking monitor: each RL step logs the rate of every hacking detector
(`hacking/<name>`, `rewards/hacking.py`); a rate that climbs is a policy learning an exploit before
its reward shows it, so the monitor watches them as the collapse monitor watches its indicators.

When a rate's last window (mean over `window` steps) is more than `rise` above its lowest window
so far, the monitor emits a `hacking_warning` event with the evidence. A cooldown of one window
separates events. It only warns; a penalty in the recipe's `reward.penalties` is the remedy.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

PREFIX = "hacking/"


@dataclass
class HackingMonitor:
    window: int = 3
    rise: float = 0.2  # a rate this far (absolute) above its lowest window is climbing
    history: dict[str, list[float]] = field(default_factory=dict)
    cooldown: int = 0

    def update(self, row: Mapping[str, float]) -> dict | None:
        """The warning (with its evidence) when a `hacking/` rate of the step's row climbs."""
        for k, v in row.items():
            if k.startswith(PREFIX):
                self.history.setdefault(k, []).append(float(v))
        self.cooldown = max(self.cooldown - 1, 0)
        evidence = self.evidence()
        if not evidence or self.cooldown:
            return None
        self.cooldown = self.window
        return {"event": "hacking_warning", "evidence": evidence}

    def evidence(self) -> dict[str, dict[str, float]]:
        out = {}
        for k, s in self.history.items():
            if len(s) < 2 * self.window:
                continue
            means = [statistics.fmean(s[i : i + self.window]) for i in range(len(s) - self.window + 1)]
            if means[-1] > min(means[:-1]) + self.rise:
                out[k] = {"lowest_window": min(means[:-1]), "now": means[-1]}
        return out
