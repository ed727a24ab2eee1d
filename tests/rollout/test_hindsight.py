"""Hindsight corrections on the calculator: failure points, hints, verification, and targets on
the student's context without the hint."""

from __future__ import annotations

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.hindsight import failed_episodes, failure_point, hindsight_corrections, hint
from agentic_rl.rollout.loop import Budget, rollout

CALL = '<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{}"}}}}\n</tool_call>'
SPEC = get_env("calculator")
BUDGET = Budget(4, 64, 256)


def _student(tokenizer):
    """Row 0: a good calculator call, then a wrong answer. Row 1: a failing call (1/0), then a wrong answer."""
    eos = tokenizer.eos_token
    script = {(0, 0): CALL.format("2+2"), (0, 1): f"<answer>0</answer>{eos}",
              (1, 0): CALL.format("1/0"), (1, 1): f"<answer>0</answer>{eos}"}
    tasks = SPEC.tasks("train", 2, 0)
    engine = ScriptedEngine(tokenizer, lambda row, turn: script[row, turn])
    params = SamplingParams(1.0, 1.0, 64, SPEC.make_env({}).format.stop_strings)
    groups, _ = rollout(engine, tokenizer, lambda: SPEC.make_env({}), tasks, 1, params, BUDGET)
    return score_groups(SPEC.make_reward({}), groups), params


def test_failure_points_and_hints(tokenizer):
    groups, _ = _student(tokenizer)
    a, b = (g.trajectories[0] for g in groups)
    assert a.reward < 1 and b.reward < 1
    assert failure_point(a) == 1 and failure_point(b) == 0  # the wrong answer; the failed call
    assert "error" in hint(b, False).lower() and "judged wrong" in hint(a, False)
    assert f"correct final answer is {a.task.answer}" in hint(a, True) and "correct final" not in hint(a, False)


@pytest.mark.parametrize("teacher_right", [True, False])
def test_only_verified_corrections_are_kept_without_the_hint(tokenizer, teacher_right):
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    eos = tokenizer.eos_token
    answer = (lambda row: failed[row].task.answer) if teacher_right else (lambda row: -1)
    teacher = ScriptedEngine(tokenizer, lambda row, turn: f"<answer>{answer(row)}</answer>{eos}")
    out = hindsight_corrections(teacher, tokenizer, lambda: SPEC.make_env({}), SPEC.make_reward({}), failed,
                                params, BUDGET, reveal_answer=True)
    assert out.attempts == 2
    if not teacher_right:
        assert out.corrections == []
        return
    a, b = out.corrections
    assert [len(a.turns), len(b.turns)] == [2, 1]  # row 0 keeps its good call; row 1 restarts at the failed call
    assert "2+2" in a.turns[0].action_text and a.turns[1].action_text.startswith(f"<answer>{failed[0].task.answer}")
    for fix, src in ((a, failed[0]), (b, failed[1])):
        text = tokenizer.decode(fix.token_ids())
        assert "Hint" not in text and src.task.prompt in text  # the student's context, not the teacher's
        assert fix.task.meta["provenance"] == "hindsight" and fix.task.meta["source_task"] == src.task.id
        assert "correct final answer" in fix.task.meta["hint"]
        assert sum(fix.loss_mask()) == sum(len(t.action_ids) for t in fix.turns)
