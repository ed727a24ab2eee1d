"""The echo-trap monitor (RAGEN, Wang et al. 2025): reward variance and entropy collapse *before*
reward does, so they are watched as leading indicators.

Each RL step feeds `CollapseMonitor.update(indicators)`, the step's typed `Indicators`. Rolling windows of reward std, the fraction of
zero-std groups and entropy are compared with their best window so far; when one has fallen (or the
zero-std fraction risen) by more than its tolerance while reward has not fallen yet, the monitor
emits a `collapse_warning` event with the evidence. A collapse can also come too fast for them:
when reward itself falls below half its best window, the monitor emits a `reward_collapse` event
(the leading indicators had nothing to say while reward fell; before, such a run went on unreported
and every collapsed step counted as healthy). The monitor only detects: the trainer acts on either
event with the remedies the recipe names (`trainer/remedies.py`), each logged as an event.
A cooldown of one window separates events.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, fields


@dataclass(frozen=True, kw_only=True)
class Indicators:
    """One RL step's values of what the monitor watches: the three leading indicators, then reward
    (None: the step had no episode of the policy's to measure)."""

    step: int
    reward_std: float | None
    frac_zero_std_groups: float | None
    entropy: float | None
    reward_mean: float | None


SERIES = tuple(f.name for f in fields(Indicators) if f.name != "step")  # the history's series, in order


@dataclass
class CollapseMonitor:
    window: int = 3
    drop: float = 0.3  # a leading indicator this far below its best window (relative) is collapsing
    rise: float = 0.3  # the zero-std fraction this far above its best window (absolute) is collapsing
    reward_drop: float = 0.1  # reward counts as already fallen below (1 - this) x its best window
    collapse: float = 0.5  # reward below (1 - this) x its best window has collapsed: a `reward_collapse` event
    history: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in SERIES})
    cooldown: int = 0

    def update(self, indicators: Indicators) -> dict | None:
        """The warning (with its evidence) when the leading indicators collapse ahead of reward."""
        for f in fields(indicators):
            value = getattr(indicators, f.name)
            if f.name in self.history and value is not None:
                self.history[f.name].append(float(value))
        self.cooldown = max(self.cooldown - 1, 0)
        kind, evidence = "collapse_warning", self.evidence()
        if not evidence:
            kind, evidence = "reward_collapse", self.reward_collapse()
        if not evidence or self.cooldown:
            return None
        self.cooldown = self.window
        return {"event": kind, "evidence": evidence}

    def reward_collapse(self) -> dict[str, dict[str, float]]:
        """Reward itself fell below (1 - `collapse`) x its best window: too late for a leading
        indicator, not too late to act (a rollback returns to the last step before the event)."""
        now, best = self._windows()
        k = "reward_mean"
        if k in now and best[k] > 0 and now[k] < (1 - self.collapse) * best[k]:
            return {k: {"best_window": best[k], "now": now[k]}}
        return {}

    def evidence(self) -> dict[str, dict[str, float]]:
        now, best = self._windows()
        if not now or "reward_mean" not in now:
            return {}
        if now["reward_mean"] < (1 - self.reward_drop) * best["reward_mean"]:
            return {}  # reward already fell: too late to call it a leading indicator
        out = {}
        for k in ("reward_std", "entropy"):
            if k in now and best[k] > 0 and now[k] < (1 - self.drop) * best[k]:
                out[k] = {"best_window": best[k], "now": now[k]}
        k = "frac_zero_std_groups"
        if k in now and now[k] > best[k] + self.rise:
            out[k] = {"best_window": best[k], "now": now[k]}
        return out

    def _windows(self) -> tuple[dict[str, float], dict[str, float]]:
        """(mean of the last window, best window mean so far) per metric with enough history."""
        now, best = {}, {}
        for k, s in self.history.items():
            if len(s) < 2 * self.window:
                continue
            means = [statistics.fmean(s[i : i + self.window]) for i in range(len(s) - self.window + 1)]
            now[k] = means[-1]
            best[k] = min(means[:-1]) if k == "frac_zero_std_groups" else max(means[:-1])
        return now, best
