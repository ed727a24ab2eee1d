"""Gated composition, tool match and the unsupervised terms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.rewards.base import Score
from agentic_rl.rewards.rubric import FormatScore, Rubric, Term
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rewards.tool_match import ToolMatchReward, tool_match
from agentic_rl.rewards.unsupervised import Confidence, SelfConsistency, WithGroupTerms
from agentic_rl.rewards.verifiers import MathVerifier
from agentic_rl.types import ToolCall, TrajectoryGroup


def _const(v: float):
    return lambda task, traj: Score(v)


@settings(max_examples=300, deadline=None)
@given(outcome_w=st.floats(0.01, 100), shaping_w=st.lists(st.floats(0, 1e6), min_size=1, max_size=4),
       shaping_v=st.floats(0, 1), cap=st.floats(0, 0.99))
def test_shaping_never_beats_a_correct_answer(outcome_w, shaping_w, shaping_v, cap):
    """Invariant: under gating, a wrong answer with perfect shaping of any weight scores strictly
    less than a correct answer with no shaping at all."""
    def rubric(outcome: float, shaping: float) -> Rubric:
        terms = [Term("outcome", _const(outcome), outcome_w)]
        terms += [Term(f"s{i}", _const(shaping), w, gated=True) for i, w in enumerate(shaping_w)]
        return Rubric(terms, outcome="outcome", gate_cap=cap)
    wrong = rubric(0.0, shaping_v)(None, None).value
    right = rubric(1.0, 0.0)(None, None).value
    assert wrong < right


def test_rubric_details_weights_and_gating(episode):
    t = episode("<answer>12</answer>")
    r = Rubric([Term("correct", MathVerifier(), 1.0), Term("format", FormatScore(), 0.1, gated=True),
                Term("logged", _const(0.7), 0.0)], outcome="correct")
    s = r(t.task, t)
    assert s.value == 1.0 and s.details["format"] == 1.0 and s.details["logged"] == 0.7  # weight 0: logged only
    wrong = episode("<answer>13</answer>")
    assert r(wrong.task, wrong).value == pytest.approx(0.1)
    with pytest.raises(ValueError, match="outcome term"):
        Rubric([Term("a", _const(1))], outcome="b")


def test_tool_match(episode):
    ref = [{"name": "calculator", "arguments": {"expression": "2 * 3"}}]
    assert tool_match(ref, [ToolCall("calculator", {"expression": "2*3"})]) == 1.0  # whitespace-insensitive
    # name right (1), keys right (Jaccard 1), value wrong (0): (1 + 1 + 0) / 3
    assert tool_match(ref, [ToolCall("calculator", {"expression": "2 + 3"})]) == pytest.approx(2 / 3)
    # keys {expression} vs {expr}: Jaccard 0, value missing: (1 + 0 + 0) / 3
    assert tool_match(ref, [ToolCall("calculator", {"expr": "2 * 3"})]) == pytest.approx(1 / 3)
    assert tool_match(ref, [ToolCall("search", {"expression": "2 * 3"})]) == 0.0
    # one right call and one extra: 1 / max(1, 2)
    assert tool_match(ref, [ToolCall("calculator", {"expression": "2*3"}), ToolCall("calculator", {"expression": "1"})]) == 0.5
    assert tool_match([], []) == 1.0
    t = episode("<answer>6</answer>", tool_calls=[(ToolCall("calculator", {"expression": "2*3"}),)],
                meta={"reference_calls": ref})
    assert ToolMatchReward()(t.task, t).value == 1.0


def test_self_consistency_and_confidence(episode):
    answers = ["12", "12", " 12. ", "7", None]
    trajs = tuple(episode(f"<answer>{a}</answer>" if a else "no answer") for a in answers)
    scores = SelfConsistency().score_group(TrajectoryGroup(trajs[0].task, trajs))
    assert [s.value for s in scores] == [1.0, 1.0, 1.0, 0.0, 0.0]  # "12", "12", " 12. " normalize alike
    tie = tuple(episode(f"<answer>{a}</answer>") for a in ["1", "1", "2", "2"])
    assert all(s.value == 0 for s in SelfConsistency().score_group(TrajectoryGroup(tie[0].task, tie)))
    t = episode("<answer>12</answer>")  # every token logprob -0.5
    assert Confidence()(t.task, t).value == pytest.approx(2.718281828 ** -0.5)


def test_group_terms_go_through_score_groups(episode):
    trajs = tuple(episode(f"<answer>{a}</answer>") for a in ["12", "12", "5"])
    reward = WithGroupTerms(MathVerifier(), [("consistency", SelfConsistency(), 0.5)])
    [scored] = score_groups(reward, [TrajectoryGroup(trajs[0].task, trajs)])
    # base (correct = answer 12) + 0.5 x majority agreement
    assert [t.reward for t in scored.trajectories] == [1.5, 1.5, 0.0]
    assert scored.trajectories[0].reward_details["consistency"] == 1.0
