"""The echo-trap monitor (RAGEN, seed 003): reward variance and entropy collapse *before* reward does,
so they are watched as leading indicators, and a warning can act.

Each RL step feeds `CollapseMonitor.update(record)`. Rolling windows of reward std, the fraction of
zero-std groups and entropy are compared with their best window so far; when one has fallen (or the
zero-std fraction risen) by more than its tolerance while reward has not fallen yet, the monitor
emits a `collapse_warning` event with the evidence, then the configured remediations, each an event:

  variance_filter  StarPO-S: train only on the groups with the highest reward spread (keep ratio down)
  entropy_bonus    add or raise the entropy bonus
  clip_high        raise the upper clip (DAPO's clip-higher: room for low-probability tokens)
  lower_lr         halve the learning rate
  rollback         restore the weights (and optimizer) of the last healthy step

Events go to metrics.jsonl (`stage: "event"`). A cooldown of one window separates actions.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from agentic_rl.algorithms.registry import Registry

WATCHED = ("reward_std", "frac_zero_std_groups", "entropy")
REMEDIES: Registry = Registry("collapse remediation")


@dataclass
class CollapseMonitor:
    window: int = 3
    drop: float = 0.3  # a leading indicator this far below its best window (relative) is collapsing
    rise: float = 0.3  # the zero-std fraction this far above its best window (absolute) is collapsing
    reward_drop: float = 0.1  # reward counts as already fallen below (1 - this) x its best window
    history: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in (*WATCHED, "reward_mean")})
    cooldown: int = 0

    def update(self, record: dict) -> dict | None:
        """The warning (with its evidence) when the leading indicators collapse ahead of reward."""
        for k, series in self.history.items():
            if isinstance(record.get(k), (int, float)):
                series.append(float(record[k]))
        self.cooldown = max(self.cooldown - 1, 0)
        evidence = self.evidence()
        if not evidence or self.cooldown:
            return None
        self.cooldown = self.window
        return {"event": "collapse_warning", "evidence": evidence}

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


@dataclass
class Remedies:
    """What the remediations act on: the RL config (changed in place), the optimizer and the model,
    with a copy of the last healthy weights for `rollback`."""

    rl: object
    optimizer: torch.optim.Optimizer
    model: torch.nn.Module
    healthy: dict | None = None

    def mark_healthy(self) -> None:
        self.healthy = {"model": copy.deepcopy(self.model.state_dict()),
                        "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def apply(self, names: Sequence[str]) -> list[dict]:
        return [{"event": "remediation", "action": n, **REMEDIES.get(n)(self)} for n in names]


def _remedy(name: str) -> Callable:
    return REMEDIES.register(name)


@_remedy("variance_filter")
def _variance_filter(r: Remedies) -> dict:
    before = r.rl.variance_keep
    r.rl.variance_keep = max(0.25, before * 0.5)
    return {"variance_keep": [before, r.rl.variance_keep]}


@_remedy("entropy_bonus")
def _entropy_bonus(r: Remedies) -> dict:
    before = r.rl.entropy_coef
    r.rl.entropy_coef = max(before * 2, 1e-3)
    return {"entropy_coef": [before, r.rl.entropy_coef]}


@_remedy("clip_high")
def _clip_high(r: Remedies) -> dict:
    before = r.rl.clip_high
    r.rl.clip_high = before + 0.08
    return {"clip_high": [before, r.rl.clip_high]}


@_remedy("lower_lr")
def _lower_lr(r: Remedies) -> dict:
    before = r.optimizer.param_groups[0]["lr"]
    for g in r.optimizer.param_groups:
        g["lr"] *= 0.5
        if "base_lr" in g:  # the scheduled base, so the next step's schedule keeps the halving
            g["base_lr"] *= 0.5
    return {"lr": [before, r.optimizer.param_groups[0]["lr"]]}


@_remedy("rollback")
def _rollback(r: Remedies) -> dict:
    if r.healthy is None:
        return {"rolled_back": False}
    lrs = [(g["lr"], g.get("base_lr")) for g in r.optimizer.param_groups]  # keep what other remediations changed
    r.model.load_state_dict(r.healthy["model"])
    r.optimizer.load_state_dict(r.healthy["optimizer"])
    for g, (lr, base) in zip(r.optimizer.param_groups, lrs):
        g["lr"] = lr
        if base is not None:
            g["base_lr"] = base
    return {"rolled_back": True}


def keep_top_spread(groups: Sequence, keep: float) -> list:
    """StarPO-S variance filtering: the `keep` fraction of groups with the highest reward std (at
    least one), in their original order."""
    if keep >= 1.0 or not groups:
        return list(groups)
    n = max(1, round(keep * len(groups)))
    spread = [statistics.pstdev(g.rewards) if len(g.rewards) > 1 else 0.0 for g in groups]
    chosen = sorted(sorted(range(len(groups)), key=lambda i: -spread[i])[:n])
    return [groups[i] for i in chosen]
