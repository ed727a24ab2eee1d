"""Bugs by mutation (`data/swe_mutate.py`) and the filter that keeps only those the tests catch
cleanly (`data/swe_build.judge`)."""

from __future__ import annotations

import ast
import shutil

import pytest

from agentic_rl.data.swe_build import Suite, judge
from agentic_rl.data.swe_issue import quotes_any
from agentic_rl.data.swe_mutate import MUTATORS, Mutation, mutate, sites
from agentic_rl.tools.sandbox.repo import RepoConfig

SOURCE = '''"""A docstring: never mutated."""


def clamp(x, lo, hi):
    if x < lo and lo is not None:
        return lo
    if x > hi:
        return hi
    return x


def window(items, n):
    return items[1:n], range(0, n), max(n, 2)
'''


def _texts(kind: str) -> list[tuple[str, str]]:
    """(the text a site replaces, its replacement) for every site of `kind` in SOURCE."""
    return [(SOURCE[s.start:s.end], s.text) for _, s in sites({"m.py": SOURCE}, kind, lambda p: True)]


def test_each_kind_changes_one_token_or_statement():
    assert _texts("operator_swap") == [("<", ">"), ("and", "or"), ("is not", "is"), (">", "<")]
    assert _texts("off_by_one") == [("<", "<="), (">", ">="), ("1", "2"), ("0", "1")]
    assert set(_texts("remove_condition")) == {
        ("x < lo and lo is not None", "x < lo"), ("x < lo and lo is not None", "lo is not None"),
        ("    if x < lo and lo is not None:\n        return lo\n", ""), ("    if x > hi:\n        return hi\n", "")}
    assert _texts("wrong_constant") == [("2", "3")]  # the index and range constants belong to off_by_one
    assert _texts("swap_arguments") == [("0, n", "n, 0"), ("n, 2", "2, n")]
    assert _texts("drop_return") == [("return lo", "lo"), ("return hi", "hi"), ("return x", "x"),
                                     ("return items[1:n], range(0, n), max(n, 2)", "items[1:n], range(0, n), max(n, 2)")]


def test_a_mutation_is_line_aligned_unique_and_reverts_exactly():
    for kind in MUTATORS:
        for path, site in sites({"m.py": SOURCE}, kind, lambda p: True):
            m, mutated = mutate(path, SOURCE, site)
            assert mutated.count(m.after) == 1 and m.apply(SOURCE) == mutated and m.revert(mutated) == SOURCE
            assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(SOURCE))
    # `return hi` removed: the block left is not unique until the neighbouring lines are in it
    (site,) = [s for _, s in sites({"m.py": SOURCE}, "remove_condition", lambda p: True) if "hi" in SOURCE[s.start:s.end]]
    m, _ = mutate("m.py", SOURCE, site)
    assert m.before.count("\n") > m.after.count("\n") and "return hi" not in m.after
    assert m.changed_lines() == [] or all(line not in m.before.splitlines() for line in m.changed_lines())


LIB = "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
TESTS = ("import unittest\nfrom lib import clamp\n\nclass T(unittest.TestCase):\n"
         "    def test_low(self):\n        self.assertEqual(clamp(-1, 0, 5), 0)\n"
         "    def test_high(self):\n        self.assertEqual(clamp(9, 0, 5), 5)\n"
         "    def test_mid(self):\n        self.assertEqual(clamp(3, 0, 5), 3)\n"
         + "".join(f"    def test_other_{i}(self):\n        self.assertTrue(True)\n" for i in range(30)))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_filter_keeps_a_mutant_only_when_its_tests_catch_it_cleanly():
    files = {"lib.py": LIB, "tests/test_lib.py": TESTS}
    suite = Suite.of("lib", files, ["."], RepoConfig(per_test_s=1.0))
    assert len(suite.passing) == 33

    def row(before: str, after: str):
        m = Mutation("lib.py", "test", LIB.split("\n").index(before) + 1, before, after, "")
        return judge(suite, m, m.apply(LIB), seed=0)
    # x < lo -> x > lo returns lo for 9 and 3 too: the three clamp tests fail (3, a tenth, is allowed)
    kept = row("    if x < lo:", "    if x > lo:")
    assert kept["FAIL_TO_PASS"] == [f"tests/test_lib.py::T::test_{n}" for n in ("high", "low", "mid")]
    assert len(kept["PASS_TO_PASS"]) == 30 and not quotes_any(kept["problem_statement"], ["    if x > lo:"])
    assert "clamp(-1, 0, 5)" in kept["problem_statement"]
    assert row("    if x > hi:", "    if x >= hi:") is None  # no test sits on the boundary: not caught
    assert row("    return x", "    while True: pass") is None  # caught only by hanging
    # breaks the import, so every test: more than a tenth of the suite
    assert row("def clamp(x, lo, hi):", "import no_such_module\ndef clamp(x, lo, hi):") is None
