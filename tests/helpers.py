"""Test helpers: one RL update from scored groups, the way `rl_step` makes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentic_rl.trainer.config import Config
from agentic_rl.trainer.credit import Credit, compute_credit
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch, Trajectory, TrajectoryGroup


def update(model, optimizer, groups: Sequence[TrajectoryGroup], cfg: Config, pad_id: int = 0,
           credit: Credit | Sequence | None = None, models: Mapping | None = None,
           corrections: Sequence[Trajectory] = ()) -> dict[str, float]:
    """`credit`: a Credit, per-trajectory advantages, or None (the groups' own, by the recipe's
    estimator); `models`: the loss's other models by `build_loss`'s names (`reference`, `critic`,
    `teachers`)."""
    if credit is None:
        credit = compute_credit(groups, cfg.rl.algorithm)
    elif not isinstance(credit, Credit):
        credit = Credit(list(credit))
    models = dict(models or {})
    loss = build_loss(cfg, model, models.get("reference"), models.get("critic"), models.get("teachers"))
    batch = UpdateBatch(RolloutBatch(tuple(groups)), credit, tuple(corrections))
    return rl_update(model, optimizer, batch, loss, cfg.rl.optim, pad_id, models.get("critic")).metrics
