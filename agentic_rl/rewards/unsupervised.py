"""Rewards that need no answer key (TTRL's majority vote, Zuo et al. 2025; self-certainty): agreement
with the group and the model's own confidence. Both are optional terms; on their own they reward
consensus, not truth (TTRL-style training works only while the majority is mostly right), so they
are logged by default (weight 0) and mixed in deliberately.

Self-consistency is a property of a group, so it is a *group reward*: `score_group(group) ->
[Score]`; `score_groups` calls that when a reward has it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rl.rewards.base import RewardFn, Score, extract_answer
from agentic_rl.types import Task, Trajectory, TrajectoryGroup


def _key(answer: str | None) -> str | None:
    from agentic_rl.data.search_qa import normalize_answer

    return normalize_answer(answer) if answer is not None else None


@dataclass(frozen=True)
class SelfConsistency:
    """1 for a trajectory whose normalized answer is the group's strict majority (more than any other
    answer, and given by at least `min_votes`); 0 otherwise, and 0 for everyone when there is no such
    majority."""

    min_votes: int = 2

    def score_group(self, group: TrajectoryGroup) -> list[Score]:
        keys = [_key(extract_answer(t.final_text)) for t in group.trajectories]
        counts = Counter(k for k in keys if k)
        ranked = counts.most_common(2)
        majority = ranked[0][0] if ranked and ranked[0][1] >= self.min_votes and (
            len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
        share = counts[majority] / len(keys) if majority else 0.0
        return [Score(float(majority is not None and k == majority), {"majority_share": share}) for k in keys]


@dataclass(frozen=True)
class Confidence:
    """exp(mean log-probability) of the final action's sampled tokens: 1 = fully certain."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        lps = trajectory.turns[-1].logprobs if trajectory.turns else ()
        return Score(math.exp(sum(lps) / len(lps)) if lps else 0.0)


@dataclass(frozen=True)
class WithGroupTerms:
    """A per-trajectory reward plus weighted group terms: value = base + sum_i w_i * term_i."""

    base: RewardFn
    terms: Sequence[tuple[str, object, float]]  # (name, a group reward, weight)

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        return self.base(task, trajectory)

    def score_group(self, group: TrajectoryGroup) -> list[Score]:
        base = [self.base(group.task, t) for t in group.trajectories]
        columns = {name: (fn.score_group(group), w) for name, fn, w in self.terms}
        out = []
        for i, b in enumerate(base):
            value = b.value + sum(w * col[i].value for col, w in columns.values())
            details = {**b.details, **{name: col[i].value for name, (col, _) in columns.items()}}
            out.append(Score(value, details, b.cost, b.error))
        return out
