"""Math answer equivalence with `math-verify`, safe to call from any thread.

math-verify guards its sympy work with `signal.alarm`, which only works in the main thread; with its
timeouts disabled it works anywhere but can hang on a pathological expression. So: numbers compare
numerically without sympy (the common case), answers longer than `MAX_ANSWER_CHARS` are wrong, and
the sympy path runs on a worker thread under our own deadline. A verification that times out scores
0 and says so in the details, never silently.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
from dataclasses import dataclass

from agentic_rl.rewards.base import Score, extract_answer
from agentic_rl.types import Task, Trajectory

MAX_ANSWER_CHARS = 200
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="agentic-rl-verify")
logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns on every call with timeouts off


def math_equal(pred: str, gold: str, timeout_s: float = 2.0) -> bool | None:
    """True/False, or None when the check timed out."""
    pred, gold = _clean(pred), _clean(gold)
    if not pred or len(pred) > MAX_ANSWER_CHARS:
        return False
    if _NUMBER.match(pred) and _NUMBER.match(gold):
        return abs(float(pred) - float(gold)) <= 1e-6 * max(1.0, abs(float(gold)))
    future = _POOL.submit(_verify, pred, gold)
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        return None


def _clean(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.strip()).rstrip(".")


def _verify(pred: str, gold: str) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(gold, parsing_timeout=None), parse(pred, parsing_timeout=None), timeout_seconds=None))
    except Exception:  # an unparsable answer is a wrong answer
        return False


@dataclass(frozen=True)
class MathAnswerReward:
    """1.0 when the final <answer> is mathematically equal to the task's answer, plus the gated
    format term (counts only when the answer is wrong, so it can never outweigh correctness)."""

    format_weight: float = 0.1
    timeout_s: float = 2.0

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        answer = extract_answer(trajectory.final_text)
        equal = math_equal(answer, str(task.answer), self.timeout_s) if answer is not None else False
        correct = float(bool(equal))
        well_formed = float(answer is not None and trajectory.num_tool_errors == 0 and trajectory.terminated)
        value = correct if correct else self.format_weight * well_formed
        return Score(value, {"correct": correct, "format": well_formed, "verify_timeout": float(equal is None)})
