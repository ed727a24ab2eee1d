"""Each reward-hacking detector fires on its behaviour and stays quiet on honest episodes."""

from __future__ import annotations

from agentic_rl.rewards.hacking import (
    HackingDetector,
    format_gaming,
    observation_parroting,
    unused_tool_results,
)
from agentic_rl.rewards.rubric import Rubric, Term
from agentic_rl.rewards.verifiers import MathVerifier
from agentic_rl.types import ToolCall

CALL = (ToolCall("calculator", {"expression": "6*7"}),)


def test_unused_tool_result(episode):
    used = episode("call", "The result is 42.\n<answer>42</answer>", observations=("42",), tool_calls=[CALL])
    ignored = episode("call", "<answer>41</answer>", observations=("42",), tool_calls=[CALL])
    assert unused_tool_results(used) == 0 and unused_tool_results(ignored) == 1


def test_format_gaming(episode):
    t = episode("<answer> </answer>")
    assert format_gaming(t.task, t)
    copied = episode("<answer>How many apples are left</answer>")
    copied = copied.__class__(copied.task.__class__("t", "How many apples are left after lunch?", "3"), copied.turns)
    assert format_gaming(copied.task, copied)
    honest = episode("<answer>3</answer>")
    assert not format_gaming(honest.task, honest)


def test_observation_parroting(episode):
    t = episode("call", "<answer>Doc 1 (Tarn)</answer>", observations=("Doc 1 (Tarn)",), tool_calls=[CALL],
                meta={"forbid_copy": True})
    assert observation_parroting(t.task, t)
    allowed = episode("call", "<answer>42</answer>", observations=("42",), tool_calls=[CALL])
    assert not observation_parroting(allowed.task, allowed)  # copying a calculator result is the point


def test_detector_as_a_penalty(episode):
    r = Rubric([Term("correct", MathVerifier(), 1.0), Term("hacking", HackingDetector(), -0.5)], outcome="correct")
    lazy = episode("call", "<answer>12</answer>", observations=("99",), tool_calls=[CALL])  # right, ignored the tool
    s = r(lazy.task, lazy)
    assert s.details["hacking/unused_tool_result"] == 1.0 and s.value == 0.5
