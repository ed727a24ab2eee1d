"""Attach outcome rewards to trajectories. A reward function that raises, hangs past the step timeout
or returns garbage (not a Score, a non-finite value) is the infrastructure's failure, not the
policy's (`faults.py`): it is tried once more (unless it hung), then the episode is marked
`infra_failure: reward` with the error, scores 0 and trains nothing; it never takes the batch down."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence

from agentic_rl.faults import InfrastructureError, Timeout, deadline
from agentic_rl.rewards.base import RewardFn, Score
from agentic_rl.types import Trajectory, TrajectoryGroup


def score_trajectory(reward_fn: RewardFn, t: Trajectory, score: Score | None = None,
                     timeout_s: float = 0.0) -> Trajectory:
    """`score`: already computed (by a group reward); otherwise `reward_fn(task, t)`."""
    if t.error and not t.turns:
        return dataclasses.replace(t, reward=0.0, reward_details={"correct": 0.0})
    if score is None or not _valid(score):
        try:
            score = _score(reward_fn, t, timeout_s)
        except Exception as e:  # noqa: BLE001 - a broken verifier costs this episode only, and never trains
            kind = e.kind if isinstance(e, InfrastructureError) else "reward"  # a judge's outage names itself
            return dataclasses.replace(t, reward=0.0, error=f"reward failed: {type(e).__name__}: {e}",
                                       infra_failure=kind)
    details = dict(score.details)
    if score.error:  # an undecided score stays in the data with its reason, flagged for the metrics
        details["reward_error"] = 1.0
        return dataclasses.replace(t, reward=float(score.value), reward_details=details,
                                   error=t.error or f"reward: {score.error}")
    return dataclasses.replace(t, reward=float(score.value), reward_details=details)


def _score(reward_fn: RewardFn, t: Trajectory, timeout_s: float) -> Score:
    """`reward_fn(task, t)`, checked; a call that raises or returns garbage is tried once more (one
    that hung is not: its second try would cost the deadline again)."""
    try:
        return _call(reward_fn, t, timeout_s)
    except Timeout:
        raise
    except Exception:  # noqa: BLE001 - one more try; its error is the one reported
        return _call(reward_fn, t, timeout_s)


def _call(reward_fn: RewardFn, t: Trajectory, timeout_s: float) -> Score:
    with deadline(timeout_s, "reward"):
        score = reward_fn(t.task, t)
    _check_score(score)
    return score


def _valid(score) -> bool:
    try:
        _check_score(score)
        return True
    except TypeError:
        return False


def _check_score(score) -> None:
    if not isinstance(score, Score):
        raise TypeError(f"expected a Score, got {score!r:.200}")
    if isinstance(score.value, bool) or not isinstance(score.value, numbers.Real) or not math.isfinite(score.value):
        raise TypeError(f"score value must be a finite number, got {score.value!r:.200}")


def score_groups(reward_fn: RewardFn, groups: Sequence[TrajectoryGroup], timeout_s: float = 0.0) -> list[TrajectoryGroup]:
    """Per trajectory, or per group when the reward has `score_group` (self-consistency needs the
    whole group); a group reward that raises falls back to scoring each trajectory alone. A reward
    with `prepare(groups)` (an LLM judge) first does the whole step's work in one batch."""
    if hasattr(reward_fn, "prepare"):
        try:
            reward_fn.prepare(groups)
        except Exception:  # noqa: BLE001 - each trajectory is then scored (and its failure kept) alone
            pass
    out = []
    for g in groups:
        scores = [None] * len(g.trajectories)
        if hasattr(reward_fn, "score_group"):
            try:
                with deadline(timeout_s * len(g.trajectories), "group reward"):
                    scores = list(reward_fn.score_group(g))
                if len(scores) != len(g.trajectories):
                    raise ValueError("score_group returned the wrong number of scores")
            except Exception:  # noqa: BLE001 - each trajectory is then scored (and its error kept) alone
                scores = [None] * len(g.trajectories)
        out.append(TrajectoryGroup(g.task, tuple(score_trajectory(reward_fn, t, s, timeout_s) for t, s in zip(g.trajectories, scores))))
    return out
