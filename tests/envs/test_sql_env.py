"""The SQL env: its tools on a read-only database, the reward on hand-made right and wrong answers,
hostile SQL that cannot write, attach or run away, and check-env through the real rollout loop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentic_rl.data import sql_tasks
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.conformance import check_env
from agentic_rl.types import Trajectory, Turn

SPEC = get_env("sql")


def _task(template: str):
    return next(t for t in sql_tasks.make_tasks(80, 5, "train") if t.meta["template"] == template)


def _answer(task, text: str) -> float:
    trajectory = Trajectory(task=task, turns=(Turn((), (1,), (0.0,), text, "eos"),), terminated=True)
    return SPEC.make_reward({})(task, trajectory)


def test_tools_list_describe_and_run_on_the_tasks_database():
    task = _task("joined")
    env = SPEC.make_env({})
    env.reset(task)
    tables = env.list_tables().split(", ")
    assert len(tables) == 3 and all(t in task.meta["schema_sql"] for t in tables)
    assert env.describe_table(tables[0]).startswith(f"CREATE TABLE {tables[0]} (")
    assert env.run_sql(task.answer).splitlines()[0] == " | ".join(map(str, sql_tasks.rows(task.meta["schema_sql"], task.answer)[0]))
    assert env.run_sql(f"SELECT * FROM {tables[0]}").endswith("only the first 20 shown)")
    with pytest.raises(ValueError, match="no table 'nope'"):
        env.describe_table("nope")


def test_the_reward_on_right_equivalent_reordered_and_wrong_answers():
    count = _task("count_above")
    gold = count.answer
    assert _answer(count, f"<answer>{gold}</answer>").value == 1.0
    equivalent = gold.replace("COUNT(*)", "COUNT(id)")  # another query, the same result set
    assert equivalent != gold and _answer(count, f"<answer>{equivalent}</answer>").details["correct"] == 1.0
    wrong = _answer(count, f"<answer>{gold.replace('>', '<')}</answer>")
    assert (wrong.value, wrong.details["correct"]) == (pytest.approx(0.1), 0.0)  # the gated format term only
    assert _answer(count, "no answer").value == 0.0
    group = _task("per_group")  # no ORDER BY: any row order is right
    assert _answer(group, f"<answer>{group.answer} ORDER BY COUNT(*) DESC</answer>").details["correct"] == 1.0
    top = _task("top")  # ordered: the same rows in another order are wrong
    reversed_order = top.answer.replace("ORDER BY c DESC", "ORDER BY c ASC")
    assert sql_tasks.rows(top.meta["schema_sql"], top.answer) != sql_tasks.rows(top.meta["schema_sql"], reversed_order)
    assert _answer(top, f"<answer>{reversed_order}</answer>").details["correct"] == 0.0


def test_hostile_sql_cannot_write_attach_or_run_away(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task = _task("names_in")
    env = SPEC.make_env({})
    for action in SPEC.hostile_actions(task, env):
        env.reset(task)
        table = env.list_tables().split(", ")[0]
        before = env.run_sql(f"SELECT COUNT(*) FROM {table}")
        start = time.perf_counter()
        result = env.step(action)
        assert time.perf_counter() - start < 5  # the step budget stops a runaway query, not the tool timeout
        assert result.tool_errors == 1 and "Error" in result.observation[0]["content"]
        assert env.run_sql(f"SELECT COUNT(*) FROM {table}") == before and env.list_tables().count(",") == 2
    assert not Path("/tmp/sql_env_attack.db").exists() and not list(tmp_path.iterdir())
    env.close()


def test_check_env_passes(tokenizer):
    checks = check_env("sql", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
