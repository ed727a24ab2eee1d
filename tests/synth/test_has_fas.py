"""Higher- and first-order action synthesis (`synth/has.py`, `synth/fas.py`): decision points found
where episodes of one task shared a history and then parted with different outcomes, the items'
answer and outcome lines, and FAS items carrying a demonstration's own first call, knowledge and answer."""

from __future__ import annotations

import json
import random

from agentic_rl.cli import main
from agentic_rl.envs.registry import resolve_env
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.monitor.trajectories import write_trajectories
from agentic_rl.synth import fas, has
from agentic_rl.types import Task, Trajectory, Turn

TASK = Task("t1", "What is 3 * (4 + 5)?", "27")


def _ep(actions: list[tuple[str, str]], reward: float, task: Task = TASK, infra: str | None = None) -> Trajectory:
    turns = tuple(Turn((1,), (2,), (-0.1,), a, "eos", observation=o) for a, o in actions)
    return Trajectory(task, turns, reward=reward, infra_failure=infra)


A, B, C, D = ("calc(4+5)", "9"), ("calc(3*9)", "27"), ("calc(3+9)", "12"), ("guess 30", "")


def test_decisions_are_where_shared_histories_part_with_different_outcomes():
    """A-B solves, A-C and D fail. At the start A (mean 0.5 over 2) and D (0 over 1) differ by 0.5;
    after A, B (1.0) and C (0.0) differ by 1. An infra failure is no outcome, and a task whose
    episodes all agree has no decision."""
    other = Task("t2", "What is 2 + 2?", "4")
    episodes = [_ep([A, B], 1.0), _ep([A, C], 0.0), _ep([D], 0.0), _ep([A, B], 0.0, infra="engine"),
                _ep([("calc(2+2)", "4")], 1.0, other), _ep([("calc(2+2)", "4")], 1.0, other)]
    points = has.decision_points(episodes)
    assert [(p.history, p.choices) for p in points] == [
        ((), (("calc(4+5)", 0.5, 2), ("guess 30", 0.0, 1))),
        ((A,), (("calc(3*9)", 1.0, 1), ("calc(3+9)", 0.0, 1))),
    ]
    assert has.decision_points(episodes, min_gap=0.6) == points[1:]


def test_an_item_shows_the_history_the_choices_the_best_and_every_outcome():
    point = has.decision_points([_ep([A, B], 1.0), _ep([A, C], 0.0)])[0]
    text = has.item_text(point, random.Random(0))
    lines = text.splitlines()
    assert lines[:3] == [f"Task: {TASK.prompt}", "Step 1 action: calc(4+5)", "Step 1 observation: 9"]
    letter = next(line[0] for line in lines if line.endswith("calc(3*9)") and line[1] == ".")
    assert f"Answer: {letter}" in lines
    assert f"{letter} led to a mean reward of 1.00 over 1 episode" in lines[-1]
    assert has.synthesize([_ep([A, B], 1.0), _ep([A, C], 0.0)], seed=3) == has.synthesize(
        [_ep([A, B], 1.0), _ep([A, C], 0.0)], seed=3)


def test_fas_items_carry_the_demonstrations_own_call_knowledge_and_answer():
    spec = resolve_env("calculator_compound", {})
    task = spec.tasks("train", 1, 5)[0]
    messages = spec.demonstration(task, spec.make_env({}))
    plan, reasoning = fas.synthesize(spec, {}, 1, 5)
    call = messages[0]["tool_calls"][0]["function"]
    assert plan.startswith(f"Task: {task.prompt}\n") and f"First tool call: {call['name']}(" in plan
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    assert all(f"- {r}" in reasoning for r in tool_results) and reasoning.endswith(f"Answer: {task.answer}")


def test_the_engine_source_writes_a_plan_per_sample(tmp_path):
    """The tiny random model writes noise, but one plan text per task and sample, in one batch."""
    spec = resolve_env("calculator_compound", {})
    items = fas.synthesize(spec, {}, 2, 1, source="engine", model="tiny", samples=2, max_new_tokens=6)
    assert 1 <= len(items) <= 4 and all(i.startswith("Task: ") and "\nPlan:\n" in i for i in items)


def test_the_commands_write_corpora_the_cpt_stage_reads(tmp_path, capsys):
    from agentic_rl.trainer.cpt import read_corpus

    write_trajectories(tmp_path / "run" / "trajectories" / "rl.jsonl", [_ep([A, B], 1.0), _ep([A, C], 0.0)],
                       load_tokenizer("tiny"))
    assert main(["synth", "has", "--trajectories", str(tmp_path / "run"), "--out", str(tmp_path / "has.jsonl")]) == 0
    assert len(read_corpus(tmp_path / "has.jsonl")) == 1
    assert main(["synth", "fas", "--env", "search_r1", "--n", "3", "--out", str(tmp_path / "fas.jsonl")]) == 0
    texts = read_corpus(tmp_path / "fas.jsonl")
    assert len(texts) == 6 and "First tool call: search(" in texts[0]
    assert "wrote 6 planning and reasoning items" in capsys.readouterr().out
    assert main(["synth", "fas", "--env", "nosuch", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert json.loads((tmp_path / "has.jsonl").read_text().splitlines()[0])["text"].startswith("Task: ")
