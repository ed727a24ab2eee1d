"""The grounding test shared by hindsight corrections and the milestones process reward."""

from __future__ import annotations

from agentic_rl.rewards.grounding import grounded
from agentic_rl.types import Turn


def turn(action, obs):
    return Turn((), (), (), action, "stop", observation=obs)


def test_grounded_reads_tool_output_not_the_call():
    """Numbers match whole (7 is not in 17 or 7.5; 7.0 is 7); the call's own text does not count."""
    assert grounded(7, [turn("calc(3+4)", "7")]) and grounded(7, [turn("calc(14/2)", "7.0")])
    assert not grounded(7, [turn("calc(10+7)", "17")]) and not grounded(7, [turn("calc(15/2)", "7.5")])
    assert not grounded(7, [turn("calc(7)", "7")]) and not grounded(7, [turn("<answer>7</answer>", "")])
    assert grounded("Paris", [turn('search("capital of France")', "Paris is the capital")])
