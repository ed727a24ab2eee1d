"""Attach outcome rewards to trajectories. A reward function that raises scores its episode 0 and
records the error; it never takes the batch down."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agentic_rl.rewards.base import RewardFn, Score
from agentic_rl.types import Trajectory, TrajectoryGroup


def score_trajectory(reward_fn: RewardFn, t: Trajectory, score: Score | None = None) -> Trajectory:
    """`score`: already computed (by a group reward); otherwise `reward_fn(task, t)`."""
    if t.error and not t.turns:
        return dataclasses.replace(t, reward=0.0, reward_details={"correct": 0.0})
    if score is None:
        try:
            score = reward_fn(t.task, t)
        except Exception as e:
            return dataclasses.replace(t, reward=0.0, error=f"reward failed: {type(e).__name__}: {e}")
    details = dict(score.details)
    if score.error:  # an undecided score stays in the data with its reason, flagged for the metrics
        details["reward_error"] = 1.0
        return dataclasses.replace(t, reward=float(score.value), reward_details=details,
                                   error=t.error or f"reward: {score.error}")
    return dataclasses.replace(t, reward=float(score.value), reward_details=details)


def score_groups(reward_fn: RewardFn, groups: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """Per trajectory, or per group when the reward has `score_group` (self-consistency needs the
    whole group); a group reward that raises falls back to scoring each trajectory alone."""
    out = []
    for g in groups:
        scores = [None] * len(g.trajectories)
        if hasattr(reward_fn, "score_group"):
            try:
                scores = reward_fn.score_group(g)
            except Exception:  # noqa: BLE001 - each trajectory is then scored (and its error kept) alone
                scores = [None] * len(g.trajectories)
        out.append(TrajectoryGroup(g.task, tuple(score_trajectory(reward_fn, t, s) for t, s in zip(g.trajectories, scores))))
    return out
