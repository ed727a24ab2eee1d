"""Reward functions: `(task, trajectory) -> Score`, and the gated outcome + format composition."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agentic_rl.types import Task, Trajectory


@dataclass(frozen=True)
class Score:
    value: float
    details: Mapping[str, float] = field(default_factory=dict)
    cost: float = 0.0  # seconds or money spent verifying, for the verifier ladder
    error: str | None = None  # the verifier could not decide (a judge that failed): recorded, never a silent 0


class RewardFn(Protocol):
    def __call__(self, task: Task, trajectory: Trajectory) -> Score: ...


# A reward that spends per step (the verifier ladder's budget) also has `new_step()`, called before a
# step's episodes are scored, and `step_metrics()`, that step's figures; a reward wrapping another
# passes both on. These two reach them, and do nothing for a reward without them.
def new_step(reward: RewardFn) -> None:
    if hasattr(reward, "new_step"):
        reward.new_step()


def step_metrics(reward: RewardFn) -> dict[str, float]:
    return reward.step_metrics() if hasattr(reward, "step_metrics") else {}


_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")


def extract_answer(text: str) -> str | None:
    """Content of the last <answer>...</answer>, or None."""
    found = _ANSWER_RE.findall(text)
    return found[-1].strip() if found else None


def parse_number(text: str | None) -> float | None:
    """The answer tag's number: "449", "-3", "1,200", "449." and "x = 449" all parse; prose does not."""
    if text is None:
        return None
    cleaned = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text).strip().rstrip(".")
    numbers = _NUMBER_RE.findall(cleaned)
    return float(numbers[-1]) if len(numbers) >= 1 and len(cleaned) <= 40 else None


@dataclass(frozen=True)
class NumericAnswerReward:
    """Outcome 1.0 when the final action's <answer> equals the task's numeric answer.

    The format term (an answer tag present, every tool call well-formed) is small and gated: it only
    counts when the outcome is 0, so format can never outweigh correctness. With `needs_tool` the
    protocol also asks for at least one tool call, so a wrong answer given without the tool does not
    earn the term that a wrong answer after a failed call is denied (measured in docs/rewards.md:
    from a weak start it did not stop GRPO drifting towards tool-less answers).
    """

    format_weight: float = 0.1
    needs_tool: bool = False

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        answer = extract_answer(trajectory.final_text)
        got = parse_number(answer)
        correct = float(got is not None and abs(got - float(task.answer)) < 1e-6)
        used_tool = trajectory.num_tool_calls > 0 or not self.needs_tool
        well_formed = float(answer is not None and trajectory.num_tool_errors == 0 and trajectory.terminated
                            and used_tool)
        value = correct if correct else self.format_weight * well_formed
        return Score(value, {"correct": correct, "format": well_formed})
