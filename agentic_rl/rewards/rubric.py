"""Reward composition: a weighted list of reward functions with gating (ToolRL, Qian et al. 2025):
the outcome dominates, and shaping terms (format, tool match) count only while the
outcome is not achieved, capped below the outcome's own weight, so that no choice of weights lets
shaping beat a correct answer. Weight 0 logs a term without rewarding it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rl.rewards.base import RewardFn, Score, new_step, step_metrics
from agentic_rl.types import Task, Trajectory


@dataclass(frozen=True)
class Term:
    name: str
    fn: RewardFn
    weight: float = 1.0
    gated: bool = False  # shaping: counts only when the outcome term scored 0


@dataclass(frozen=True)
class Rubric:
    """value = w_outcome * outcome + sum of ungated terms
              + min(sum of gated terms, gate_cap * w_outcome)   if outcome == 0
    Every term's own value lands in details (`<name>`), weighted or not, plus the summed cost."""

    terms: Sequence[Term]
    outcome: str  # the name of the term that says "solved"
    gate_cap: float = 0.5  # the most shaping can earn, as a fraction of the outcome weight

    def __post_init__(self) -> None:
        names = [t.name for t in self.terms]
        if self.outcome not in names:
            raise ValueError(f"outcome term {self.outcome!r} is not among the terms {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate term names in {names}")
        if not 0 <= self.gate_cap < 1:
            raise ValueError("gate_cap must be in [0, 1): shaping must stay below a correct answer")

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        scores = {t.name: t.fn(task, trajectory) for t in self.terms}
        weights = {t.name: t.weight for t in self.terms}
        solved = scores[self.outcome].value > 0
        value = weights[self.outcome] * scores[self.outcome].value
        shaping = 0.0
        for t in self.terms:
            if t.name == self.outcome:
                continue
            if t.gated:
                shaping += 0.0 if solved else t.weight * scores[t.name].value
            else:
                value += t.weight * scores[t.name].value
        value += min(shaping, self.gate_cap * weights[self.outcome])
        details = {name: s.value for name, s in scores.items()}
        for name, s in scores.items():
            details.update({f"{name}/{k}": v for k, v in s.details.items()})
        errors = [f"{name}: {s.error}" for name, s in scores.items() if s.error]
        return Score(value, details, sum(s.cost for s in scores.values()), "; ".join(errors) or None)


@dataclass(frozen=True)
class FormatScore:
    """1 when the episode ended by itself with an answer tag and every tool call was well-formed and
    ran: the usual gated shaping term."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        from agentic_rl.rewards.base import extract_answer

        ok = extract_answer(trajectory.final_text) is not None and trajectory.num_tool_errors == 0 and trajectory.terminated
        return Score(float(ok))


@dataclass(frozen=True)
class GatedOutcome:
    """A verifier's outcome with the gated format term (a Rubric of the two), and `correct`, what
    accuracy reads: the verifier's own, else whether it gave a full score (a unit-test pass rate of 1)."""

    verifier: RewardFn
    format_weight: float = 0.1
    format: RewardFn = FormatScore()  # what "well formed" means: an answer tag, by default

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        rubric = Rubric((Term("outcome", self.verifier), Term("format", self.format, self.format_weight, gated=True)),
                        outcome="outcome")
        s = rubric(task, trajectory)
        correct = s.details.get("outcome/correct", float(s.details["outcome"] >= 1.0))
        return Score(s.value, {**s.details, "correct": correct}, s.cost, s.error)

    def new_step(self) -> None:
        new_step(self.verifier)

    def step_metrics(self) -> dict[str, float]:
        return step_metrics(self.verifier)
