"""The multi-tier verifier ladder: spend expensive verification only where it pays.

Tiers are ordered by cost (rules and schema checks, then simulation, then high fidelity, then a
"world" or human tier). A candidate climbs while it passes; it stops at the first tier that rejects
it, unless it is high-value (then the next tier gets a second opinion). A tier may answer None
(uncertain): that escalates too. The verdict is the last tier's. Verdicts are cached by the content
hash of (task, candidate), a per-step budget caps the declared cost, and the ladder's metrics give
calls, pass rate and spend per tier.

A tier whose verdicts arrive later (a human, a lab, a slow simulator) is a `QueueTier`: it records
the candidate and answers "pending" (None) until `resolve` delivers the verdict, which the cache then
serves to every identical candidate.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, Trajectory

Check = Callable[[Task, str], "bool | None"]


@dataclass
class Tier:
    name: str
    check: Check
    cost: float  # declared cost of one call (seconds, dollars...), what the budget counts
    calls: int = 0
    passes: int = 0
    spent: float = 0.0  # declared cost spent
    seconds: float = 0.0  # wall time measured
    errors: int = 0  # checks that raised: counted as uncertain (the next tier decides)


@dataclass
class QueueTier(Tier):
    """Verdicts that come later. `pending` holds (key, task, candidate) until `resolve(key, verdict)`."""

    pending: dict[str, tuple[Task, str]] = field(default_factory=dict)
    resolved: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check = self._check

    def _check(self, task: Task, candidate: str) -> bool | None:
        key = content_key(task, candidate)
        if key in self.resolved:
            return self.resolved[key]
        self.pending[key] = (task, candidate)
        return None

    def resolve(self, key: str, verdict: bool) -> None:
        self.pending.pop(key, None)
        self.resolved[key] = verdict


def content_key(task: Task, candidate: str) -> str:
    return hashlib.sha256(f"{task.id}\x00{task.prompt}\x00{candidate}".encode()).hexdigest()


class VerifierLadder:
    """A reward function: 1.0 if the candidate is accepted, else 0.0; `details` say how far it got."""

    def __init__(self, tiers: list[Tier], extract: Callable[[Trajectory], str | None],
                 budget_per_step: float | None = None, high_value: Callable[[Task], bool] | None = None):
        self.tiers, self.extract, self.budget, self.high_value = tiers, extract, budget_per_step, high_value
        self.cache: dict[str, tuple[bool | None, int]] = {}
        self.cache_hits = 0
        self.step_spent = 0.0
        self.over_budget = 0
        self._at_step_start: dict[str, float] = {}  # `metrics()` as the step began

    def new_step(self) -> None:
        """A step starts: its budget is whole again, and `step_metrics` counts from here."""
        self.step_spent = 0.0
        self._at_step_start = self.metrics()

    def step_metrics(self) -> dict[str, float]:
        """`ladder/...` since `new_step`: per tier its calls, pass rate, declared cost and wall seconds;
        the cache hits, the candidates the budget turned away, the budget and what the step spent."""
        now, start = self.metrics(), self._at_step_start
        delta = {k: v - start.get(k, 0.0) for k, v in now.items() if not k.endswith("/pass_rate")}
        for t in self.tiers:
            calls = delta[f"ladder/{t.name}/calls"]
            passes = t.passes - start.get(f"ladder/{t.name}/passes", 0.0)
            delta[f"ladder/{t.name}/pass_rate"] = passes / calls if calls else 0.0
            del delta[f"ladder/{t.name}/passes"]
        seconds = sum(delta[f"ladder/{t.name}/seconds"] for t in self.tiers)
        return {**delta, "ladder/seconds": seconds, "ladder/spent": self.step_spent,
                "ladder/budget": self.budget if self.budget is not None else 0.0}

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        candidate = self.extract(trajectory)
        if candidate is None:
            return Score(0.0, {"accepted": 0.0, "tier_reached": 0.0, "no_candidate": 1.0})
        return self.verify(task, candidate)

    def verify(self, task: Task, candidate: str) -> Score:
        key = content_key(task, candidate)
        if key in self.cache:
            self.cache_hits += 1
            verdict, reached = self.cache[key]
            return _score(verdict, reached, 0.0, cached=True)
        verdict, reached, spent = self._climb(task, candidate)
        if verdict is not None:  # pending and over-budget verdicts are asked again next time
            self.cache[key] = (verdict, reached)
        return _score(verdict, reached, spent, cached=False)

    def _climb(self, task: Task, candidate: str) -> tuple[bool | None, int, float]:
        verdict, reached, spent = None, 0, 0.0
        for i, tier in enumerate(self.tiers):
            if self.budget is not None and self.step_spent + tier.cost > self.budget:
                self.over_budget += 1
                return None, reached, spent
            start = time.perf_counter()
            try:
                verdict = tier.check(task, candidate)
            except Exception:  # noqa: BLE001 - a broken tier is uncertain, never a crash
                verdict, tier.errors = None, tier.errors + 1
            tier.seconds += time.perf_counter() - start
            tier.calls, tier.spent = tier.calls + 1, tier.spent + tier.cost
            tier.passes += verdict is True
            self.step_spent += tier.cost
            spent, reached = spent + tier.cost, i + 1
            if verdict is False and not (self.high_value and self.high_value(task)):
                break
        return verdict, reached, spent

    def metrics(self) -> dict[str, float]:
        out = {"ladder/cache_hits": float(self.cache_hits), "ladder/over_budget": float(self.over_budget)}
        for t in self.tiers:
            out |= {f"ladder/{t.name}/calls": float(t.calls), f"ladder/{t.name}/passes": float(t.passes),
                    f"ladder/{t.name}/pass_rate": t.passes / max(t.calls, 1),
                    f"ladder/{t.name}/cost": t.spent, f"ladder/{t.name}/seconds": t.seconds,
                    f"ladder/{t.name}/errors": float(t.errors)}
        return out


def _score(verdict: bool | None, reached: int, spent: float, cached: bool) -> Score:
    details = {"accepted": float(verdict is True), "tier_reached": float(reached), "pending": float(verdict is None),
               "cached": float(cached)}
    return Score(float(verdict is True), details, spent)
