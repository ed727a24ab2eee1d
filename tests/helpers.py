"""Test helpers: one RL update from scored groups, the way `rl_step` makes it."""

from __future__ import annotations

from collections.abc import Sequence

from agentic_rl.trainer.config import Config
from agentic_rl.trainer.credit import Credit, compute_credit
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch, Trajectory, TrajectoryGroup


def update(model, optimizer, groups: Sequence[TrajectoryGroup], cfg: Config, pad_id: int = 0,
           credit: Credit | Sequence | None = None, reference=None, critic=None, teachers=None,
           corrections: Sequence[Trajectory] = ()) -> dict[str, float]:
    """`credit`: a Credit, per-trajectory advantages, or None (the groups' own, by the recipe's
    estimator)."""
    if credit is None:
        credit = compute_credit(groups, cfg.rl.algorithm)
    elif not isinstance(credit, Credit):
        credit = Credit(list(credit))
    loss = build_loss(cfg, model, reference, critic, teachers)
    batch = UpdateBatch(RolloutBatch(tuple(groups)), credit, tuple(corrections))
    return rl_update(model, optimizer, batch, loss, cfg.rl.optim, pad_id, critic).metrics
