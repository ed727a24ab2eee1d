"""Rollout metrics from scored trajectory groups."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rl.types import TrajectoryGroup

# The prefixes of a metrics row's keys that measure the machine, not the run (wall times, rates,
# resident memory): two runs of one recipe differ in these and in nothing else.
MACHINE_PREFIXES = ("time_", "tokens_per_s", "episodes_per_s", "mem_")


def reward_components(trajs) -> dict[str, float]:
    """`reward/<name>`: the mean of every reward detail (rubric terms, verifier flags, F1, hacking
    flags), over the trajectories that report it."""
    keys = sorted({k for t in trajs for k in t.reward_details})
    return {f"reward/{k}": statistics.fmean(t.reward_details[k] for t in trajs if k in t.reward_details) for k in keys}


def capabilities(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Six capability dimensions of an agent (the agentic-RL survey's taxonomy), from what the
    episodes did.

    format compliance (answer tag, calls well formed); tool-call accuracy (calls that parsed and ran);
    multi-step success (solved, among episodes that made two or more calls); self-correction (solved,
    among episodes that hit a tool error); exploration (distinct first actions per group, over the
    group size); efficiency (generated tokens and turns per solved episode)."""
    groups = with_episodes(groups)
    trajs = [t for g in groups for t in g.trajectories]
    solved = [t for t in trajs if t.reward_details.get("correct", 0.0) > 0]
    calls = sum(t.num_tool_calls for t in trajs)
    multi = [t for t in trajs if t.num_tool_calls >= 2]
    erred = [t for t in trajs if t.num_tool_errors > 0]
    rate = lambda xs: statistics.fmean(t.reward_details.get("correct", 0.0) for t in xs) if xs else 0.0  # noqa: E731
    if not trajs:
        return {}
    return {
        "cap/format_compliance": statistics.fmean(t.reward_details.get("format", 0.0) for t in trajs),
        "cap/tool_call_accuracy": 1.0 - sum(t.num_tool_errors for t in trajs) / calls if calls else 0.0,
        "cap/multi_step_success": rate(multi),
        "cap/self_correction": rate(erred),
        "cap/exploration": statistics.fmean(
            len({t.turns[0].action_text if t.turns else "" for t in g.trajectories}) / len(g.trajectories) for g in groups),
        "cap/tokens_per_solved": sum(t.num_generated for t in trajs) / len(solved) if solved else 0.0,
        "cap/turns_per_solved": sum(len(t.turns) for t in trajs) / len(solved) if solved else 0.0,
    }


def with_episodes(groups: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """The groups that hold an episode: a group whose every episode the machine failed (a Ray worker
    died with its whole group) has no figures of its own, and a group figure of it would be a guess."""
    return [g for g in groups if g.trajectories]


def tool_counts(trajs) -> dict[str, float]:
    """`tools/<name>`: calls per episode of each tool."""
    counts = Counter(c.name for t in trajs for turn in t.turns for c in turn.tool_calls)
    return {f"tools/{name}": n / len(trajs) for name, n in sorted(counts.items())}


def correct_by_kind(groups: Sequence[TrajectoryGroup], key: str = "template") -> dict[str, list[float]]:
    """Each episode's `correct` (0 where the reward has none), by the task's meta field `key`, sorted
    by kind; tasks without the field are left out."""
    kinds: dict[str, list[float]] = {}
    for g in groups:
        if key in g.task.meta:
            kinds.setdefault(str(g.task.meta[key]), []).extend(t.reward_details.get("correct", 0.0) for t in g.trajectories)
    return dict(sorted(kinds.items()))


def by_template(groups: Sequence[TrajectoryGroup], key: str = "template") -> dict[str, float]:
    """`accuracy_by_<key>/<kind>`: the sampled accuracy of each task kind present in the step: which
    templates RL is still learning, step by step, read as eval.json's `accuracy_by_<key>` reads the
    held-out episodes."""
    return {f"accuracy_by_{key}/{k}": statistics.fmean(v) for k, v in correct_by_kind(groups, key).items()}


@dataclass(frozen=True, kw_only=True)
class RewardSpread:
    """The rewards of a step's episodes as the collapse monitor reads them."""

    mean: float
    std: float  # over every episode (the population's)
    frac_zero_std_groups: float  # groups whose episodes all have one reward (no GRPO signal)


def reward_spread(groups: Sequence[TrajectoryGroup]) -> RewardSpread | None:
    """The spread of the groups' rewards (those that hold an episode); None without an episode."""
    groups = with_episodes(groups)
    rewards = [t.reward for g in groups for t in g.trajectories]
    if not rewards:
        return None
    return RewardSpread(mean=statistics.fmean(rewards), std=statistics.pstdev(rewards),
                        frac_zero_std_groups=statistics.fmean(len(set(g.rewards)) <= 1 for g in groups))


def rollout_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Step metrics of the groups (those that hold an episode)."""
    groups = with_episodes(groups)
    trajs = [t for g in groups for t in g.trajectories]
    spread = reward_spread(groups)
    if spread is None:
        return {}
    calls = sum(t.num_tool_calls for t in trajs)
    errors = sum(t.num_tool_errors for t in trajs)
    return {**reward_components(trajs), **capabilities(groups), **tool_counts(trajs), **by_template(groups),
        "reward_mean": spread.mean,
        "reward_std": spread.std,
        "accuracy": statistics.fmean(t.reward_details.get("correct", 0.0) for t in trajs),
        "format_rate": statistics.fmean(t.reward_details.get("format", 0.0) for t in trajs),
        "frac_zero_std_groups": spread.frac_zero_std_groups,
        "tokens_generated": sum(t.num_generated for t in trajs),
        "response_tokens_mean": statistics.fmean(t.num_generated for t in trajs),
        "turns_per_episode": statistics.fmean(len(t.turns) for t in trajs),
        "tool_calls_per_episode": calls / len(trajs),
        "tool_error_rate": errors / calls if calls else 0.0,
        "truncation_rate": statistics.fmean(t.truncated for t in trajs),
        "episode_error_rate": statistics.fmean(t.error is not None for t in trajs),
        # where a template rewrote the history (`history: template`) or an agent edited its own
        **({"context_restarts_per_episode": statistics.fmean(t.restarts for t in trajs)}
           if any(t.restarts for t in trajs) else {}),
    }
