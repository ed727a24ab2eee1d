"""How far a judge can be trusted before it trains anything: its verdicts against the env's verifier.

`judge_agreement` grades real episodes (a run's `trajectories/*.jsonl`: each line holds the episode
and the reward the env's verifier gave it) with an `LLMJudge` and compares the two as pass/fail
labels: accuracy with its Wilson interval, Cohen's kappa (agreement beyond what the two label rates
give by chance: 1 = always agree, 0 = chance, < 0 = worse), and the confusion counts. An episode the
judge could not grade (it failed, timed out or wrote no score) is counted apart and left out of the
agreement: an outage is not a verdict.

`agentic-rl judge-agreement RUN_DIR --judge smollm2` runs it (docs/rewards.md, "Judges").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from agentic_rl.rewards.judge import JudgeError, LLMJudge, complete_many
from agentic_rl.types import Trajectory


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """(p_o - p_e) / (1 - p_e) for two binary raters; 1.0 when both give one label throughout (they
    agree, and chance explains nothing more), 0.0 on no items."""
    n = len(a)
    if n != len(b):
        raise ValueError(f"{n} labels against {len(b)}")
    if not n:
        return 0.0
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (exact-coverage enough at small n, never outside [0, 1])."""
    if not n:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, kw_only=True)
class Agreement:
    episodes: int  # graded by both
    judge_failures: int  # the judge could not grade these: left out
    accuracy: float
    accuracy_interval: tuple[float, float]
    kappa: float
    verifier_pass_rate: float
    judge_pass_rate: float
    # confusion: judge verdict x verifier verdict
    both_pass: int
    both_fail: int
    judge_only: int  # the judge passes what the verifier fails (the exploitable direction)
    verifier_only: int

    def to_json(self) -> dict:
        return asdict(self)


def agreement(judge: Sequence[bool], verifier: Sequence[bool], failures: int = 0) -> Agreement:
    n = len(judge)
    agree = sum(j == v for j, v in zip(judge, verifier))
    return Agreement(
        episodes=n, judge_failures=failures, accuracy=agree / n if n else 0.0,
        accuracy_interval=wilson_interval(agree, n), kappa=cohen_kappa(judge, verifier),
        verifier_pass_rate=sum(verifier) / n if n else 0.0, judge_pass_rate=sum(judge) / n if n else 0.0,
        both_pass=sum(j and v for j, v in zip(judge, verifier)),
        both_fail=sum(not j and not v for j, v in zip(judge, verifier)),
        judge_only=sum(j and not v for j, v in zip(judge, verifier)),
        verifier_only=sum(v and not j for j, v in zip(judge, verifier)))


def judge_agreement(judge: LLMJudge, episodes: Sequence[Trajectory], min_reward: float = 1.0,
                    threshold: float = 0.5) -> Agreement:
    """The judge's pass (score >= `threshold`) against the verifier's (reward >= `min_reward`) on
    `episodes`, graded in one batch."""
    answers = complete_many(judge.engine, [judge.messages(t.task, judge.response(t)) for t in episodes])
    verdicts, truth, failures = [], [], 0
    for t, answer in zip(episodes, answers):
        try:
            score = judge.parse(answer)
        except JudgeError:
            failures += 1
            continue
        verdicts.append(score.value >= threshold)
        truth.append(t.reward >= min_reward)
    return agreement(verdicts, truth, failures)
