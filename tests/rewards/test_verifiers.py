"""Every built-in verifier against hand-checked cases, adversarial near-misses included."""

from __future__ import annotations

import shutil

import pytest

from agentic_rl.rewards.verifiers import (
    ExactMatchVerifier,
    JSONSchemaVerifier,
    MathVerifier,
    SQLVerifier,
    UnitTestVerifier,
)


@pytest.mark.parametrize(("text", "gold", "value"), [
    ("<answer>72.0</answer>", "72", 1.0),  # a float spelling of an integer
    ("<answer>72.01</answer>", "72", 0.0),  # a near miss is a miss
    ("<answer>\\boxed{72}</answer>", "72", 1.0),
    ("so the result is \\boxed{\\frac{3}{4}}", "0.75", 1.0),  # boxed outside the tag (boxed=True)
    ("<answer>3/4</answer>", "0.75", 1.0),
    ("<answr>72</answr>", "72", 0.0),  # the wrong tag is no answer
    ("<think><answer>72</answer></think> <answer>71</answer>", "72", 0.0),  # the last answer counts
    ("<answer></answer>", "72", 0.0),
    ("<answer>1,000</answer>", "1000", 1.0),
    ("<answer>-5</answer>", "5", 0.0),
])
def test_math(episode, text, gold, value):
    t = episode(text, answer=gold)
    assert MathVerifier()(t.task, t).value == value


@pytest.mark.parametrize(("text", "golds", "em", "f1"), [
    ("<answer>The Eiffel Tower.</answer>", ["eiffel tower"], 1.0, 1.0),  # article, case, punctuation
    ("<answer>  eiffel   tower </answer>", ["Eiffel Tower"], 1.0, 1.0),
    ("<answer>Eiffel</answer>", ["Eiffel Tower"], 0.0, 2 / 3),  # P=1, R=1/2 -> F1=2/3
    ("<answer>Paris</answer>", ["Lutetia", "Paris"], 1.0, 1.0),  # an alias
    ("<answer>a</answer>", ["the"], 1.0, 0.0),  # both normalize to empty: EM equal, no tokens for F1
])
def test_exact_match(episode, text, golds, em, f1):
    t = episode(text, answer=golds[0], meta={"aliases": golds[1:]})
    score = ExactMatchVerifier()(t.task, t)
    assert score.value == em and score.details["f1"] == pytest.approx(f1)


DB = """CREATE TABLE t(name TEXT, n INT);
INSERT INTO t VALUES ('a', 1), ('b', 2), ('c', 2);"""


@pytest.mark.parametrize(("sql", "gold", "value"), [
    ("SELECT name FROM t WHERE n = 2", "SELECT name FROM t WHERE n >= 2", 1.0),  # same rows, other query
    ("SELECT name FROM t WHERE n = 2 ORDER BY name DESC", "SELECT name FROM t WHERE n = 2", 1.0),  # unordered gold
    ("SELECT name FROM t WHERE n = 2 ORDER BY name DESC", "SELECT name FROM t WHERE n = 2 ORDER BY name", 0.0),
    ("SELECT DISTINCT n FROM t", "SELECT n FROM t", 0.0),  # a multiset: duplicates matter
    ("SELECT nam FROM t", "SELECT name FROM t", 0.0),  # invalid SQL is a wrong answer
    ("DELETE FROM t", "SELECT name FROM t", 0.0),  # writes are denied
    ("ATTACH DATABASE '/tmp/x.db' AS x", "SELECT name FROM t", 0.0),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", "SELECT 1", 0.0),  # endless
])
def test_sql(episode, sql, gold, value):
    t = episode(f"<answer>{sql}</answer>", answer=gold, meta={"schema_sql": DB})
    score = SQLVerifier(max_steps=200_000)(t.task, t)
    assert score.value == value


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["city", "n"], "additionalProperties": False}


@pytest.mark.parametrize(("text", "value"), [
    ('<answer>{"city": "Lisk", "n": 3}</answer>', 1.0),
    ('<answer>{"city": "Lisk", "n": 3.5}</answer>', 0.0),
    ('<answer>{"city": "Lisk"}</answer>', 0.0),
    ('<answer>{"city": "Lisk", "n": 3, "x": 1}</answer>', 0.0),
    ("<answer>{city: Lisk}</answer>", 0.0),
    ('{"city": "Lisk", "n": 3}', 0.0),  # no answer tag
])
def test_json_schema(episode, text, value):
    t = episode(text, meta={"schema": SCHEMA})
    assert JSONSchemaVerifier()(t.task, t).value == value


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


@needs_bwrap
@pytest.mark.parametrize(("code", "rate"), [
    ("def add(a, b):\n    return a + b", 1.0),
    # add(1,2)=3 pass, add(-1,1)=-1-1=-2 fail, add(2,2)=4 pass -> 2/3
    ("def add(a, b):\n    return a + b if a > 0 else a - b", 2 / 3),
    # add(1,2)=2 fail, add(-1,1)=-1 fail, add(2,2)=4 pass -> 1/3
    ("def add(a, b):\n    return a * b", 1 / 3),
    ("def add(a, b) return", 0.0),  # a syntax error fails every test
    ("import sys\nsys.exit(0)", 0.0),  # exiting before the tests run passes none
    ("def add(a, b):\n    while True: pass", 0.0),  # a hang fails the remaining tests
])
def test_unit_tests(episode, code, rate):
    t = episode(f"```python\n{code}\n```", meta={"tests": TESTS})
    assert UnitTestVerifier(timeout_s=3.0)(t.task, t).value == pytest.approx(rate)


@needs_bwrap
def test_fail_to_pass_and_pass_to_pass(episode):
    meta = {"fail_to_pass": ["assert add(2, 2) == 4"], "pass_to_pass": ["assert add(0, 0) == 0"]}
    fixed_t = episode("<code>def add(a, b):\n    return a + b</code>", meta=meta)
    broke_t = episode("<code>def add(a, b):\n    return 4</code>", meta=meta)
    fixed, broke = UnitTestVerifier()(fixed_t.task, fixed_t), UnitTestVerifier()(broke_t.task, broke_t)
    assert fixed.value == 1.0 and fixed.details["f2p_rate"] == 1.0
    assert broke.value == 0.0 and broke.details["f2p_rate"] == 1.0 and broke.details["p2p_rate"] == 0.0
