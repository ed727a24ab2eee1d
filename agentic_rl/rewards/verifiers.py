"""Built-in verifiers: `(task, trajectory) -> Score(value, details, cost)`.

Each reads the policy's final answer (the last `<answer>` of the final action; code also from a
fenced block or `<code>`), checks it against what the task carries, and reports the seconds it spent
(`cost`) so the verifier ladder can budget it. A verifier never raises on model output: unparsable
answers are wrong answers, with the reason in `details`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentic_rl.registry import Registry
from agentic_rl.rewards.base import RewardFn, Score, extract_answer, parse_number
from agentic_rl.rewards.math import math_equal
from agentic_rl.types import Task, Trajectory

_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
_CODE_TAG = re.compile(r"<code>(.*?)</code>", re.DOTALL)


def final_answer(trajectory: Trajectory, boxed: bool = False) -> str | None:
    """The last `<answer>` of the final action; with `boxed`, a `\\boxed{}` in it (or in the action)."""
    text = trajectory.final_text
    answer = extract_answer(text)
    source = answer if answer is not None else (text if boxed else None)
    if boxed and source is not None:
        found = _BOXED.findall(source)
        if found:
            return found[-1].strip()
    return answer


def final_code(trajectory: Trajectory) -> str | None:
    """The program the policy submitted: the last fenced block or <code> of the final action, else its
    <answer>."""
    text = trajectory.final_text
    blocks = _FENCE.findall(text) or _CODE_TAG.findall(text)
    return blocks[-1] if blocks else extract_answer(text)


def _timed(fn):
    def wrapper(self, task: Task, trajectory: Trajectory) -> Score:
        start = time.perf_counter()
        score = fn(self, task, trajectory)
        return Score(score.value, score.details, time.perf_counter() - start, score.error)
    return wrapper


@dataclass(frozen=True)
class MathVerifier:
    """1 if the answer is mathematically equal to `task.answer` (math-verify; `72.0` == `72`,
    `\\frac{1}{2}` == `0.5`); `boxed` also accepts `\\boxed{}` answers."""

    boxed: bool = True
    timeout_s: float = 2.0

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        answer = final_answer(trajectory, self.boxed)
        if answer is None:
            return Score(0.0, {"correct": 0.0, "no_answer": 1.0})
        equal = math_equal(answer, str(task.answer), self.timeout_s)
        return Score(float(bool(equal)), {"correct": float(bool(equal)), "verify_timeout": float(equal is None)})


@dataclass(frozen=True)
class NumericVerifier:
    """1 if the answer's number equals `task.answer` within `rel_tol` of its size (or `abs_tol`):
    "1,200", "1200." and "x = 1200" all read 1200; prose does not."""

    rel_tol: float = 1e-6
    abs_tol: float = 1e-9

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        got, gold = parse_number(final_answer(trajectory)), parse_number(str(task.answer))
        if got is None:
            return Score(0.0, {"correct": 0.0, "no_answer": 1.0})
        correct = float(gold is not None and abs(got - gold) <= max(self.abs_tol, self.rel_tol * abs(gold)))
        return Score(correct, {"correct": correct})


@dataclass(frozen=True)
class ExactMatchVerifier:
    """SQuAD-normalized exact match against the answer and `task.meta["aliases"]`; token F1 in details."""

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        from agentic_rl.data.search_qa import exact_match, token_f1

        answer = final_answer(trajectory)
        golds = [str(task.answer), *task.meta.get("aliases", ())]
        if answer is None:
            return Score(0.0, {"correct": 0.0, "f1": 0.0, "no_answer": 1.0})
        em = exact_match(answer, golds)
        return Score(em, {"correct": em, "f1": token_f1(answer, golds)})


@dataclass(frozen=True)
class UnitTestVerifier:
    """The submitted code against `task.meta["tests"]` (assert statements), run in the sandbox.
    Value: the pass rate. With `fail_to_pass` / `pass_to_pass` lists (SWE-style) the value is 1 only if
    every F2P test now passes and no P2P test broke; both rates are in details."""

    timeout_s: float = 10.0

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        code = final_code(trajectory)
        if not code:
            return Score(0.0, {"pass_rate": 0.0, "no_code": 1.0})
        f2p, p2p = task.meta.get("fail_to_pass"), task.meta.get("pass_to_pass")
        tests = list(f2p or []) + list(p2p or []) if f2p is not None else list(task.meta.get("tests", []))
        passed = run_tests(code, tests, self.timeout_s)
        rate = sum(passed) / max(len(tests), 1)
        if f2p is None:
            return Score(rate, {"pass_rate": rate, "tests": float(len(tests))})
        f2p_ok, p2p_ok = passed[: len(f2p)], passed[len(f2p):]
        f2p_rate, p2p_rate = sum(f2p_ok) / max(len(f2p_ok), 1), sum(p2p_ok) / max(len(p2p_ok), 1)
        resolved = float(all(f2p_ok) and all(p2p_ok))
        return Score(resolved, {"pass_rate": rate, "f2p_rate": f2p_rate, "p2p_rate": p2p_rate, "resolved": resolved})


_HARNESS = """
import json, sys
__results = []
for __src in json.loads(sys.argv[1] if len(sys.argv) > 1 else {tests!r}):
    try:
        exec(__src, globals())
        __results.append(True)
    except BaseException:
        __results.append(False)
print("\\n__RESULTS__" + json.dumps(__results))
"""


def run_tests(code: str, tests: Sequence[str], timeout_s: float = 10.0) -> list[bool]:
    """Which of `tests` pass after `code` ran, in one sandboxed program (a test that fails, raises or
    hangs the program counts as failed; a crash fails every test not yet reported)."""
    from agentic_rl.tools.sandbox import SandboxConfig, run_python

    program = code + "\n" + _HARNESS.format(tests=json.dumps(list(tests)))
    out = run_python(program, SandboxConfig(timeout_s=timeout_s, max_output_chars=200_000)).stdout
    marker = out.rfind("__RESULTS__")
    if marker < 0:
        return [False] * len(tests)
    try:
        results = json.loads(out[marker + len("__RESULTS__"):].strip().splitlines()[0])
    except (json.JSONDecodeError, IndexError):
        return [False] * len(tests)
    return [bool(r) for r in results][: len(tests)] + [False] * max(0, len(tests) - len(results))


@dataclass(frozen=True)
class SQLVerifier:
    """Result-set equality: the predicted and the gold query (`task.answer`) on the task's database
    (`task.meta["schema_sql"]`: CREATE and INSERT statements, built in memory). Rows compare as a
    multiset unless the gold query orders them. Model SQL may only read: anything else is denied by
    an authorizer, and a query stops after `max_steps` VM steps."""

    max_steps: int = 5_000_000

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        query = final_answer(trajectory)
        if not query:
            return Score(0.0, {"correct": 0.0, "no_answer": 1.0})
        gold = self._rows(task.meta["schema_sql"], str(task.answer))
        try:
            got = self._rows(task.meta["schema_sql"], query)
        except sqlite3.Error:  # invalid SQL, a denied statement or an exhausted budget: a wrong answer
            return Score(0.0, {"correct": 0.0, "sql_error": 1.0})
        ordered = re.search(r"\border\s+by\b", str(task.answer), re.IGNORECASE) is not None
        same = got == gold if ordered else Counter(got) == Counter(gold)
        return Score(float(same), {"correct": float(same), "rows": float(len(got))})

    def _rows(self, schema_sql: str, query: str) -> list[tuple]:
        db = sqlite3.connect(":memory:")
        try:
            db.executescript(schema_sql)
            db.set_authorizer(_read_only)
            steps = [0]

            def budget() -> int:
                steps[0] += 1000
                return int(steps[0] > self.max_steps)
            db.set_progress_handler(budget, 1000)
            return [tuple(r) for r in db.execute(query).fetchmany(100_000)]
        finally:
            db.close()


def _read_only(action: int, *args) -> int:
    allowed = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
    return sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY


@dataclass(frozen=True)
class JSONSchemaVerifier:
    """1 if the answer parses as JSON and validates against `task.meta["schema"]` (jsonschema)."""

    @_timed
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        import jsonschema

        answer = final_answer(trajectory)
        try:
            value = json.loads(answer) if answer is not None else None
        except json.JSONDecodeError:
            return Score(0.0, {"valid": 0.0, "parse_error": 1.0})
        if answer is None:
            return Score(0.0, {"valid": 0.0, "no_answer": 1.0})
        errors = list(jsonschema.Draft202012Validator(task.meta["schema"]).iter_errors(value))
        return Score(float(not errors), {"valid": float(not errors), "schema_errors": float(len(errors))})


@dataclass(frozen=True)
class VerifierEntry:
    """A named verifier: `make(options)` builds it; `reads` are the task fields it checks against
    ("answer", or a `task.meta` key), so a task file lacking one is refused when it loads."""

    make: Callable[[Mapping[str, Any]], RewardFn]
    reads: tuple[str, ...]


VERIFIERS: Registry[VerifierEntry] = Registry("verifier")
VERIFIERS.register("math")(VerifierEntry(lambda o: MathVerifier(timeout_s=float(o.get("timeout_s", 2.0))), ("answer",)))
VERIFIERS.register("exact_match")(VerifierEntry(lambda o: ExactMatchVerifier(), ("answer",)))
VERIFIERS.register("numeric")(VerifierEntry(lambda o: NumericVerifier(float(o.get("rel_tol", 1e-6))), ("answer",)))
VERIFIERS.register("json_schema")(VerifierEntry(lambda o: JSONSchemaVerifier(), ("schema",)))
VERIFIERS.register("unit_tests")(VerifierEntry(lambda o: UnitTestVerifier(float(o.get("timeout_s", 10.0))), ("tests",)))
VERIFIERS.register("sql")(VerifierEntry(lambda o: SQLVerifier(), ("answer", "schema_sql")))
