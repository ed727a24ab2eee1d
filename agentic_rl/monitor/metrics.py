"""Rollout metrics from scored trajectory groups."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from agentic_rl.types import TrajectoryGroup


def reward_components(trajs) -> dict[str, float]:
    """`reward/<name>`: the mean of every reward detail (rubric terms, verifier flags, F1, hacking
    flags), over the trajectories that report it."""
    keys = sorted({k for t in trajs for k in t.reward_details})
    return {f"reward/{k}": statistics.fmean(t.reward_details[k] for t in trajs if k in t.reward_details) for k in keys}


def rollout_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    trajs = [t for g in groups for t in g.trajectories]
    if not trajs:
        return {}
    rewards = [t.reward for t in trajs]
    calls = sum(t.num_tool_calls for t in trajs)
    errors = sum(t.num_tool_errors for t in trajs)
    return {**reward_components(trajs),
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "accuracy": statistics.fmean(t.reward_details.get("correct", 0.0) for t in trajs),
        "format_rate": statistics.fmean(t.reward_details.get("format", 0.0) for t in trajs),
        "frac_zero_std_groups": statistics.fmean(len(set(g.rewards)) <= 1 for g in groups),
        "tokens_generated": sum(t.num_generated for t in trajs),
        "response_tokens_mean": statistics.fmean(t.num_generated for t in trajs),
        "turns_per_episode": statistics.fmean(len(t.turns) for t in trajs),
        "tool_calls_per_episode": calls / len(trajs),
        "tool_error_rate": errors / calls if calls else 0.0,
        "truncation_rate": statistics.fmean(t.truncated for t in trajs),
        "episode_error_rate": statistics.fmean(t.error is not None for t in trajs),
    }
