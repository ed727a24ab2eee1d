"""The calculator's outcome + gated format reward, and its tool-gated variant."""

from __future__ import annotations

from agentic_rl.envs.builtin.calculator import SPEC
from agentic_rl.rewards.base import NumericAnswerReward
from agentic_rl.types import ToolCall

CALL = ((ToolCall("calculator", {"expression": "3 * 4"}),),)


def test_the_format_term_counts_only_for_a_wrong_answer(episode):
    reward = NumericAnswerReward(format_weight=0.1)
    right = episode("<answer>12</answer>")
    assert reward(right.task, right).value == 1.0
    wrong = episode("<answer>13</answer>")
    assert reward(wrong.task, wrong).value == 0.1
    no_tag = episode("13")
    assert reward(no_tag.task, no_tag).value == 0.0


def test_needs_tool_withholds_the_format_term_from_a_wrong_answer_given_without_the_tool(episode):
    """Invariant: with `needs_tool`, among wrong answers only those that called a tool earn the format
    term; a right answer is worth 1 with or without the tool (the outcome is what is asked)."""
    reward = NumericAnswerReward(format_weight=0.1, needs_tool=True)
    skipped = episode("The answer is 3 * 4. <answer>13</answer>")
    called = episode("<tool_call>...</tool_call>", "The answer is 13. <answer>13</answer>", tool_calls=CALL)
    right_without = episode("<answer>12</answer>")
    assert reward(skipped.task, skipped).value == 0.0
    assert reward(called.task, called).value == 0.1
    assert reward(right_without.task, right_without).value == 1.0
    assert NumericAnswerReward(0.1)(skipped.task, skipped).value == 0.1  # the default keeps it


def test_the_calculator_env_takes_the_option(episode):
    skipped = episode("<answer>13</answer>")
    assert SPEC.make_reward({"format_needs_tool": True})(skipped.task, skipped).value == 0.0
    assert SPEC.make_reward({})(skipped.task, skipped).value == 0.1
