"""The SQL agent: a question about a SQLite database, answered with a query whose result set is
checked against the gold query's (docs/envs/sql.md).

Tools: `list_tables`, `describe_table` (its CREATE statement and three rows), `run_sql` (a query on a
read-only connection: only SELECT and reads pass its authorizer, at most `max_steps` VM steps and
`max_rows` rows shown). The answer is the final query inside <answer></answer>. Reward: result-set
equality with the gold query (a multiset unless the gold query orders), the format term gated.

Options: `format` (hermes), `format_weight` (0.1), `max_rows` (20), `max_steps` (2,000,000),
`tool_timeout_s` (5), `fewshot`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from agentic_rl.data import sql_tasks as data
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.rubric import GatedOutcome
from agentic_rl.rewards.verifiers import SQLVerifier
from agentic_rl.types import Task

SYSTEM_PROMPT = (
    "You answer questions about a SQLite database by writing SQL. The tables' names are not the "
    "question's words: list the tables and describe the ones you need, try your query with run_sql, "
    "then give the final query inside <answer></answer> tags."
)
OPTIONS = ("format", "format_weight", "max_rows", "max_steps", "tool_timeout_s")
_READS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


class SQLEnv(ToolEnv):
    """One episode: the task's database, built in memory, behind a read-only authorizer."""

    def __init__(self, options: Mapping[str, Any]):
        self.max_rows, self.max_steps = int(options.get("max_rows", 20)), int(options.get("max_steps", 2_000_000))
        self.db: sqlite3.Connection | None = None
        fewshot = fewshot_messages() if options.get("fewshot") else ()
        super().__init__([self.list_tables, self.describe_table, self.run_sql], SYSTEM_PROMPT, fewshot=fewshot,
                         format=get_format(options.get("format", "hermes")),
                         timeout_s=float(options.get("tool_timeout_s", 5.0)))

    def reset(self, task: Task) -> list[dict]:
        self.close()
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.executescript(task.meta["schema_sql"])
        self.db.set_authorizer(lambda action, *args: sqlite3.SQLITE_OK if action in _READS else sqlite3.SQLITE_DENY)
        return super().reset(task)

    def list_tables(self) -> str:
        """List the database's tables."""
        return ", ".join(r[0] for r in self._read("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"))

    def describe_table(self, table: str) -> str:
        """Show a table's columns (its CREATE statement) and its first three rows.

        Args:
            table: the table's name, as list_tables gives it.
        """
        found = self._read("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        if not found:
            raise ValueError(f"no table {table!r}; the tables are: {self.list_tables()}")
        sample = self._read(f'SELECT * FROM "{table}" LIMIT 3')
        return found[0][0] + "\n" + "\n".join(" | ".join(map(str, r)) for r in sample)

    def run_sql(self, query: str) -> str:
        """Run a read-only SQL query; returns its rows (the first ones, if there are many).

        Args:
            query: one SQL SELECT statement.
        """
        got = self._read(query, limit=self.max_rows + 1)
        shown = got[: self.max_rows]
        text = "\n".join(" | ".join(map(str, r)) for r in shown) or "(no rows)"
        return text + (f"\n... (more than {self.max_rows} rows; only the first {self.max_rows} shown)"
                       if len(got) > self.max_rows else "")

    def _read(self, query: str, params: tuple = (), limit: int = 10_000) -> list[tuple]:
        """A read under the authorizer and a step budget; a denied or broken statement raises (the
        model reads the error)."""
        if self.db is None:
            raise RuntimeError("no database: the episode has not started")
        steps = [0]

        def budget() -> int:
            steps[0] += 1000
            return int(steps[0] > self.max_steps)
        self.db.set_progress_handler(budget, 1000)
        try:
            return [tuple(r) for r in self.db.execute(query, params).fetchmany(limit)]
        except sqlite3.Error as e:
            raise ValueError(f"{type(e).__name__}: {e}" + (" (the query ran past its step budget)"
                                                            if steps[0] > self.max_steps else "")) from None
        finally:
            self.db.set_progress_handler(None, 0)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


def demonstration(task: Task, env: SQLEnv) -> list[dict]:
    """List the tables, describe the two the gold query reads first, try it, answer with it; every
    tool result is the env's own."""
    env.reset(task)
    tables = env.list_tables().split(", ")
    used = sorted((t for t in tables if f" {t}" in f" {task.answer}"), key=str(task.answer).index)[:2]
    steps = [("list_tables", {}, "Let me see which tables there are."),
             *[("describe_table", {"table": t}, f"I will look at {t}.") for t in used],
             ("run_sql", {"query": str(task.answer)}, "This query should answer it; let me run it.")]
    out: list[dict] = []
    for name, args, content in steps:
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        out += [{"role": "assistant", "content": content, "tool_calls": [call]},
                {"role": "tool", "name": name, "content": str(env.tools[name](**args))}]
    out.append({"role": "assistant", "content": f"<answer>{task.answer}</answer>"})
    return out


def fewshot_messages() -> tuple[dict, ...]:
    """One worked example on a training database (the prompt-engineering baseline)."""
    task = data.make_tasks(1, 777, "train")[0]
    env = SQLEnv({})
    try:
        return ({"role": "user", "content": task.prompt}, *demonstration(task, env))
    finally:
        env.close()


def hostile_actions(task: Task, env: SQLEnv) -> list[str]:
    """Writes, an attached file, a pragma, a recursive query and a join of billions of rows: each an
    error observation (denied, or stopped at the step budget)."""
    env.reset(task)
    tables = env.list_tables().split(", ")

    def call(query: str) -> str:
        return call_action(env.format, "run_sql", query=query)
    return [call(f"DROP TABLE {tables[0]}"), call(f"DELETE FROM {tables[0]}"),
            call(f"INSERT INTO {tables[0]} (id) VALUES (-1)"), call("ATTACH DATABASE '/tmp/sql_env_attack.db' AS x"),
            call("PRAGMA writable_schema = 1"), call("CREATE TABLE t (x)"),
            call("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT COUNT(*) FROM r"),
            call(f"SELECT COUNT(*) FROM {tables[0]} a, {tables[0]} b, {tables[0]} c, {tables[0]} d")]


SPEC = EnvSpec(
    name="sql",
    make_env=SQLEnv,
    make_reward=lambda options: GatedOutcome(SQLVerifier(), float(options.get("format_weight", 0.1))),
    tasks=lambda split, n, seed: data.make_tasks(n, seed, split),
    splits=data.SPLITS,
    demonstration=demonstration,
    options=OPTIONS,
    hostile_actions=hostile_actions,
)
SPECS = (SPEC,)
