"""Calculator demonstrations: each style solves its task with real calculator calls, deterministically,
and says in words only what its calls compute."""

from __future__ import annotations

import re

import pytest

from agentic_rl.data.calculator import make_tasks
from agentic_rl.data.calculator_demos import demonstration
from agentic_rl.tools import calculator
from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "heldout_out", "rl_extra")


@pytest.mark.parametrize("split", SPLITS)
def test_demonstrations_solve_the_task(split: str) -> None:
    for task in make_tasks(120, seed=8, split=split):
        messages = demonstration(task)
        calls = [m for m in messages if m["role"] == "assistant" and "tool_calls" in m]
        tools = [m for m in messages if m["role"] == "tool"]
        assert len(calls) == len(tools) == len(task.meta["steps"])
        assert [m["role"] for m in messages] == ["assistant", "tool"] * len(calls) + ["assistant"]
        for call, tool, step in zip(calls, tools, task.meta["steps"], strict=True):
            (tool_call,) = call["tool_calls"]
            assert tool_call == {
                "type": "function",
                "function": {"name": "calculator", "arguments": {"expression": step}},
            }
            assert tool == {"role": "tool", "name": "calculator", "content": calculator(step)}
            assert step in call["content"] and "{" not in call["content"]
        assert f"<answer>{task.answer}</answer>" in messages[-1]["content"]
        assert "tool_calls" not in messages[-1]
        if task.meta["family"] == "two_step":
            assert len(calls) == 2


def test_demonstrations_are_deterministic_and_varied() -> None:
    tasks = make_tasks(100, seed=6)
    assert [demonstration(t) for t in tasks] == [demonstration(t) for t in tasks]
    openings = {demonstration(t)[0]["content"].split(". ")[-1] for t in tasks}
    assert len(openings) > 1  # the tool phrase varies across tasks


# Each plan clause read back into arithmetic; "{prev}" is the result of the call before.
_CLAUSES_BACK = (
    (r"multiply (\d+) by (\d+)", "{0} * {1}"), (r"divide (\d+) by (\d+)", "{0} / {1}"),
    (r"add (\d+) and (\d+)", "{0} + {1}"), (r"subtract (\d+) from (\d+)", "{1} - {0}"),
    (r"multiply by (\d+)", "{prev} * {0}"), (r"divide by (\d+)", "{prev} / {0}"),
    (r"add (\d+)", "{prev} + {0}"), (r"subtract (\d+)", "{prev} - {0}"),
    (r"subtract that from (\d+)", "{0} - {prev}"), (r"divide (\d+) by that", "{0} / {prev}"),
)


def _read_back(clause: str, prev: str) -> str:
    for pattern, expression in _CLAUSES_BACK:
        if m := re.fullmatch(pattern, clause):
            return expression.format(*m.groups(), prev=prev)
    raise AssertionError(f"unreadable plan clause {clause!r}")


@pytest.mark.parametrize("split", ["train", "rl_extra"])
def test_word_problem_demonstrations_open_with_a_faithful_plan(split: str) -> None:
    # The first action states every call in words; each later action restates its own clause. Read
    # back, the clauses compute exactly what the demonstration's calls compute, so the plan the policy
    # learns to write is a plan it can follow.
    for task in make_tasks(150, seed=3, split=split):
        assert not any("Plan:" in m.get("content", "") for m in demonstration(task))  # only when asked
        actions = [m["content"] for m in demonstration(task, style="plan") if m["role"] == "assistant"][:-1]
        if task.meta["family"] == "bare":
            assert not actions[0].startswith("Plan:")
            continue
        plan = re.match(r"Plan: (.+?)\. ", actions[0])
        assert plan is not None, actions[0]
        clauses = plan[1].split(", then ")
        assert len(clauses) == len(task.meta["steps"])
        prev = ""
        for i, (clause, step) in enumerate(zip(clauses, task.meta["steps"], strict=True)):
            assert calculator(_read_back(clause, prev)) == calculator(step)
            if i:
                assert actions[i].startswith(f"Then {clause}. ")
            prev = calculator(step)


@pytest.mark.parametrize("split", ["train", "heldout_out", "rl_extra"])
def test_compound_demonstrations_make_one_call_that_computes_the_answer(split: str) -> None:
    # A multi-step word problem becomes one call of the template's whole expression, and that call
    # alone yields the answer; bare arithmetic and one-step problems are demonstrated as in "steps".
    for task in make_tasks(150, seed=3, split=split):
        compound = demonstration(task, style="compound")
        calls = [m["tool_calls"][0]["function"]["arguments"]["expression"] for m in compound if m.get("tool_calls")]
        assert len(calls) == 1
        assert calculator(calls[0]) == str(task.answer)
        if len(task.meta["steps"]) == 1:
            assert compound == demonstration(task)
        else:
            assert any(op in calls[0] for op in "+-*/") and calls[0] not in task.meta["steps"]


@pytest.mark.parametrize("split", ["train", "heldout_out", "rl_extra"])
def test_chain_demonstrations_name_each_step_before_the_compound_call(split: str) -> None:
    # The chain style is the compound call (same expression, same answer) whose sentence first names
    # every earlier step as an expression of the task's numbers; each named sub-expression computes
    # that step's reference result and is copied verbatim into the call.
    for task in make_tasks(150, seed=3, split=split):
        chain, compound = demonstration(task, style="chain"), demonstration(task, style="compound")
        if len(task.meta["steps"]) == 1:
            assert chain == compound
            continue
        call = chain[0]["tool_calls"][0]["function"]["arguments"]["expression"]
        assert call == compound[0]["tool_calls"][0]["function"]["arguments"]["expression"]
        assert chain[1:] == compound[1:]
        assert chain[0]["content"].endswith(compound[0]["content"])
        lead = chain[0]["content"].removesuffix(compound[0]["content"])
        assert lead.endswith(". ")
        subs = re.findall(r"\(?\d+(?: [-+*/] \d+)+\)?", lead)
        assert [calculator(e) for e in subs] == task.meta["milestones"], (lead, task.meta)
        assert all(e.strip("()") in call for e in subs)


def test_mixed_demonstrations_are_compound_or_steps_half_and_half() -> None:
    # Each multi-step demonstration is byte-identical to one of the two pure styles (the coin has its
    # own rng, so phrasing is not shifted), and both occur in roughly equal numbers.
    multi = [t for t in make_tasks(400, seed=4) if len(t.meta["steps"]) > 1]
    chosen = []
    for task in multi:
        mixed = demonstration(task, style="mixed")
        assert mixed in (demonstration(task, style="compound"), demonstration(task))
        chosen.append(mixed == demonstration(task, style="compound"))
    assert 0.35 < sum(chosen) / len(chosen) < 0.65, (sum(chosen), len(chosen))
    for task in make_tasks(40, seed=4):
        if len(task.meta["steps"]) == 1:
            assert demonstration(task, style="mixed") == demonstration(task)


def test_unknown_demonstration_style_is_refused() -> None:
    with pytest.raises(KeyError, match="demonstration style"):
        demonstration(make_tasks(1, seed=0)[0], style="plans")


def test_demonstration_without_slot_values() -> None:
    # A task built outside make_tasks may lack meta["values"]; the demo falls back to a generic sentence.
    task = Task(
        id="x", prompt="?", answer=449, meta={"template": "bake_sell", "steps": ["24 * 36", "864 - 415"]}
    )
    messages = demonstration(task)
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["864", "449"]
    assert messages[2]["content"].startswith("I need to compute 864 - 415.")
    assert messages[-1]["content"].endswith("<answer>449</answer>")
