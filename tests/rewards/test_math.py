"""Math equivalence: numbers compare numerically, symbolic forms through math-verify, from any
thread (math-verify's own signal-based timeouts would fail outside the main thread)."""

from __future__ import annotations

import threading

import pytest

from agentic_rl.rewards.math import MAX_ANSWER_CHARS, MathAnswerReward, math_equal
from agentic_rl.types import Task, Trajectory, Turn


@pytest.mark.parametrize(("pred", "gold", "equal"), [
    ("-204.0", "-204", True),  # Python prints a float for an exact integer division
    ("1,200", "1200", True),
    ("42.", "42", True),
    ("\\frac{138}{583}", "138/583", True),  # symbolic: math-verify's LaTeX path
    ("0.5", "1/2", True),
    ("6.321", "6.32098837209", False),  # within 1e-3 but not 1e-6 relative: wrong
    ("x", "3", False),
    ("", "3", False),
    ("9" * (MAX_ANSWER_CHARS + 1), "3", False),
])
def test_math_equal(pred, gold, equal):
    assert math_equal(pred, gold) is equal


def test_works_off_the_main_thread():
    out = []
    t = threading.Thread(target=lambda: out.append(math_equal("\\frac{1}{2}", "1/2")))
    t.start()
    t.join()
    assert out == [True]


def _traj(text: str, errors: int = 0) -> Trajectory:
    turn = Turn((), (1,), (0.0,), text, "eos", tool_errors=errors)
    return Trajectory(Task("t", "q", "12"), (turn,), terminated=True)


def test_reward_is_gated():
    reward = MathAnswerReward(format_weight=0.1)
    assert reward(Task("t", "q", "12"), _traj("<answer>12.0</answer>")).value == 1.0
    assert reward(Task("t", "q", "12"), _traj("<answer>13</answer>")).value == pytest.approx(0.1)
    assert reward(Task("t", "q", "12"), _traj("<answer>13</answer>", errors=1)).value == 0.0
    assert reward(Task("t", "q", "12"), _traj("12")).value == 0.0  # no answer tag
