"""The test runner of a repository session: runs inside the sandbox (standard library only), with
the repository as its working directory, and writes one JSON line per test to a pipe.

It collects what pytest collects from a small suite: `unittest.TestCase` classes (run through
unittest itself, so setUp, setUpClass, subTest, skips and expected failures behave as unittest's),
`test*` functions and `Test*` classes, `mark.parametrize`, fixtures from the module and its
conftest.py files, and the builtin `tmp_path` and `monkeypatch`. Node ids are pytest's:
`tests/test_x.py::TestY::test_z`, `tests/test_x.py::test_f[1-2]`. Each test has its own time limit
(SIGALRM). A failure is described by what the test called, what it expected and what it got, read
off the test's own failing line (a plain `assert` is re-evaluated part by part, as pytest's
assertion rewriting shows it) — never from the code under test.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import json
import os
import signal
import sys
import tempfile
import time
import unittest

ASSERT_EQUAL = {"assertEqual", "assertEquals", "assertIs", "assertListEqual", "assertDictEqual", "assertTupleEqual",
                "assertSequenceEqual", "assertCountEqual", "assertSetEqual", "assertMultiLineEqual",
                "assertAlmostEqual", "assertAlmostEquals"}
ASSERT_VALUE = {"assertTrue": "a true value", "assertFalse": "a false value", "assertIsNone": "None",
                "assertIsNotNone": "a value other than None"}
CAP = 300  # characters of a value or message kept


class TestTimeout(BaseException):
    """Raised into a test by its alarm (a BaseException, so `except Exception` in the code cannot eat it)."""


def _alarm(signum, frame):
    raise TestTimeout("the test ran longer than its time limit")


def _short(text: str) -> str:
    text = str(text)
    return text if len(text) <= CAP else text[:CAP] + "…"


# ----------------------------------------------------------------------------- collection
def discover(top: str) -> list[str]:
    found = []
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        found += [os.path.normpath(os.path.join(base, f)) for f in sorted(files)
                  if f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py"))]
    return found


def import_file(path: str):
    """Import a test file as pytest's default ("prepend") mode does: its first directory up that is
    not a package goes on sys.path, the module is named from there."""
    base, parts = os.path.dirname(os.path.abspath(path)), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.exists(os.path.join(base, "__init__.py")):
        base, parts = os.path.dirname(base), [os.path.basename(base), *parts]
    if base not in sys.path:
        sys.path.insert(0, base)
    return importlib.import_module(".".join(parts))


def conftest_fixtures(path: str) -> dict:
    """Fixtures of the conftest.py files from the repository root down to the test file's directory."""
    fixtures, here = {}, os.path.abspath(".")
    parts = os.path.relpath(os.path.dirname(os.path.abspath(path)), here).split(os.sep)
    for depth in range(len(parts) + 1):
        conf = os.path.join(here, *[p for p in parts[:depth] if p != "."], "conftest.py")
        if os.path.exists(conf):
            fixtures.update(fixtures_of(import_file(conf)))
    return fixtures


def fixtures_of(module) -> dict:
    """The module's fixtures (made by the pytest stand-in's `fixture`)."""
    return {v._agentic_fixture: v for v in vars(module).values() if callable(v) and hasattr(v, "_agentic_fixture")}


def items_of(module, path: str) -> list[tuple[str, object]]:
    """(node id, how to run it) for every test of a module, in definition order."""
    items = []
    for name, value in list(vars(module).items()):
        if inspect.isclass(value) and issubclass(value, unittest.TestCase):
            items += [(f"{path}::{name}::{m}", ("unittest", value, m)) for m in unittest.TestLoader().getTestCaseNames(value)]
        elif inspect.isclass(value) and name.startswith("Test") and "__init__" not in vars(value):
            for m in sorted(n for n in dir(value) if n.startswith("test") and callable(getattr(value, n))):
                items += [(f"{path}::{name}::{m}{suffix}", ("method", value, m, args))
                          for suffix, args in expand(getattr(value, m))]
        elif inspect.isfunction(value) and name.startswith("test"):
            items += [(f"{path}::{name}{suffix}", ("function", value, args)) for suffix, args in expand(value)]
    return items


def expand(fn) -> list[tuple[str, dict]]:
    """The parametrized cases of `fn` as (id suffix, arguments); [("", {})] when it has none."""
    cases = [("", {}, ())]
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], list(mark.args[1])
        # pytest's rule: one name given as a string takes each value whole; a list of names unpacks
        single = isinstance(names, str) and "," not in names.strip().rstrip(",")
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        ids = mark.kwargs.get("ids")
        new = []
        for k, value in enumerate(values):
            own_id, marks = getattr(value, "id", None), tuple(getattr(value, "marks", ()) or ())
            value = value.values if hasattr(value, "values") and hasattr(value, "marks") else value
            row = (value,) if single else tuple(value)
            label = own_id or (ids[k] if isinstance(ids, (list, tuple)) else "-".join(
                _idval(v, n, k) for v, n in zip(row, names)))
            new += [(f"{s}-{label}" if s else label, {**a, **dict(zip(names, row))}, (*m, *marks)) for s, a, m in cases]
        cases = new
    return [(f"[{s}]" if s else "", {**args, "__marks__": marks}) for s, args, marks in cases]


def _idval(value, name: str, k: int) -> str:
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    return f"{name}{k}"


def select(items, selectors: list[str]) -> tuple[list, list[str]]:
    """The items the selectors name (a file, a class, a test, one parametrized case), and the
    selectors that named nothing."""
    chosen, missing = {}, []
    for sel in selectors:
        hits = [(i, item) for i, item in enumerate(items) if item[0] == sel or item[0].startswith(sel + "::")
                or item[0].startswith(sel + "[")]
        if not hits:
            missing.append(sel)
        chosen.update(hits)
    return [chosen[i] for i in sorted(chosen)], missing


# ----------------------------------------------------------------------------- running
class Recorder(unittest.TestResult):
    """unittest's outcomes of one class, as our records (the alarm armed per test)."""

    def __init__(self, ids: dict, emit, limit: float, path: str):
        super().__init__()
        self.ids, self.emit, self.limit, self.path, self.bad = ids, emit, limit, path, {}
        self.done: set[str] = set()
        self.class_error: dict | None = None  # setUpClass (or a class cleanup) failed

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, self.limit)

    def stopTest(self, test):
        signal.setitimer(signal.ITIMER_REAL, 0)
        super().stopTest(test)
        node = self.ids.get(test.id())
        if node is not None:
            outcome, info = self.bad.pop(test.id(), ("passed", {}))
            self.done.add(node)
            self.emit({"id": node, "outcome": outcome, "seconds": round(time.monotonic() - self.t0, 3), **info})

    def _bad(self, test, outcome, err=None, reason=None):
        if test.id() not in self.bad or outcome in ("failed", "error"):
            self.bad[test.id()] = (outcome, describe(err, self.path) if err else {"error": _short(reason or "")})

    def addFailure(self, test, err):
        self._bad(test, "failed", err)

    def addError(self, test, err):
        if not hasattr(test, "_testMethodName"):  # a class fixture's error, reported on a placeholder
            self.class_error = describe(err, self.path)
            return
        self._bad(test, "failed" if err[0] is TestTimeout else "error", err)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._bad(test, "failed" if issubclass(err[0], AssertionError) else "error", err)

    def addSkip(self, test, reason):
        self._bad(test, "skipped", reason=reason)

    def addExpectedFailure(self, test, err):
        self._bad(test, "xfailed", err)

    def addUnexpectedSuccess(self, test):
        self._bad(test, "failed", reason="unexpected success")


def run_unittest(cls, names: dict[str, str], emit, limit: float, path: str) -> None:
    """One TestCase class through a unittest suite (its class fixtures run once)."""
    cases = [cls(name) for name in names]
    recorder = Recorder({c.id(): names[c._testMethodName] for c in cases}, emit, limit, path)
    unittest.TestSuite(cases).run(recorder)
    signal.setitimer(signal.ITIMER_REAL, 0)
    for node in names.values():  # a failed setUpClass skips its tests: each is an error
        if node not in recorder.done:
            emit({"id": node, "outcome": "error", **(recorder.class_error or {"error": "the test did not run"})})


def run_plain(node: str, kind: tuple, fixtures: dict, emit, limit: float, path: str) -> None:
    args = dict(kind[-1])
    t0, cleanups, outcome, info = time.monotonic(), [], "passed", {}
    try:
        instance = kind[1]() if kind[0] == "method" else None
    except BaseException as e:  # noqa: BLE001 - a class that cannot be made fails its tests
        emit({"id": node, "outcome": "error", **describe((type(e), e, e.__traceback__), path)})
        return
    fn = getattr(instance, kind[2]) if instance is not None else kind[1]
    marks = [m.name for m in (*args.pop("__marks__", ()), *getattr(fn, "pytestmark", []))]
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        _skip_marks(fn)
        if instance is not None and hasattr(instance, "setup_method"):
            instance.setup_method(fn)
        for name in inspect.signature(fn).parameters:
            if name not in args:
                args[name] = _fixture(name, fixtures, cleanups)
        fn(**args)
        if "xfail" in marks:
            outcome, info = "xpassed", {}
    except BaseException as e:  # noqa: BLE001 - whatever the test raised is its outcome
        outcome, info = _outcome(e, marks), describe((type(e), e, e.__traceback__), path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for cleanup in reversed(cleanups):
            try:
                cleanup()
            except Exception:  # noqa: BLE001 - a teardown's failure does not change the test's outcome
                pass
    emit({"id": node, "outcome": outcome, "seconds": round(time.monotonic() - t0, 3), **info})


def _skip_marks(fn) -> None:
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "skip" or (mark.name == "skipif" and mark.args and mark.args[0]):
            raise _shim().Skipped(mark.kwargs.get("reason", ""))


def _outcome(e: BaseException, marks) -> str:
    if type(e).__name__ == "Skipped" or isinstance(e, unittest.SkipTest):
        return "skipped"
    if "xfail" in marks:
        return "xfailed"
    return "failed" if isinstance(e, (AssertionError, TestTimeout)) else "error"


def _shim():
    import pytest

    return pytest


def _fixture(name: str, fixtures: dict, cleanups: list):
    if name == "tmp_path":
        import pathlib

        return pathlib.Path(tempfile.mkdtemp(prefix="test-"))
    if name == "monkeypatch":
        mp = _shim().MonkeyPatch() if hasattr(_shim(), "MonkeyPatch") else None
        cleanups.append(mp.undo)
        return mp
    if name not in fixtures:
        raise LookupError(f"fixture {name!r} not found")
    fn = fixtures[name]
    args = {p: _fixture(p, fixtures, cleanups) for p in inspect.signature(fn).parameters}
    value = fn(**args)
    if inspect.isgenerator(value):
        gen, value = value, next(value)
        cleanups.append(lambda: next(gen, None))
    return value


# ----------------------------------------------------------------------------- describing failures
_TREES: dict = {}


def describe(err, path: str) -> dict:
    """error: the exception; where/line: the test's own failing line; call/expected/got or raised:
    what the line called and what came back, when the line says."""
    etype, value, tb = err
    info = {"error": _short(f"{etype.__name__}: {value}".rstrip(": ") if str(value) else etype.__name__)}
    target, frame = os.path.abspath(path), None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == target:
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    if frame is None or etype is TestTimeout:
        return info
    import linecache

    info.update(where=f"{path}:{line}", line=linecache.getline(target, line).strip())
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # re-evaluating the line must not hang the run
        info.update(_explain(_statement(target, line), frame, etype))
    except BaseException:  # noqa: BLE001 - an explanation is a courtesy, never a new failure
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return info


def _statement(target: str, line: int):
    if target not in _TREES:
        with open(target, encoding="utf-8") as f:
            _TREES[target] = ast.parse(f.read())
    best = None
    for node in ast.walk(_TREES[target]):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno):
                best = node
    return best


def _explain(stmt, frame, etype) -> dict:
    src, value = ast.unparse, lambda node: _short(repr(eval(compile(ast.Expression(node), "<t>", "eval"),
                                                              frame.f_globals, frame.f_locals)))
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
            got, want = _actual_first(test.left, test.comparators[0])
            return {"call": src(got), "got": value(got), "expected": value(want)}
        return {"call": src(test), "got": value(test), "expected": "a true value"}
    call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
    method = call.func.attr if call is not None and isinstance(call.func, ast.Attribute) else ""
    if method in ASSERT_EQUAL and len(call.args) >= 2:
        got, want = _actual_first(call.args[0], call.args[1])
        return {"call": src(got), "got": value(got), "expected": value(want)}
    if method in ASSERT_VALUE and call.args:
        return {"call": src(call.args[0]), "got": value(call.args[0]), "expected": ASSERT_VALUE[method]}
    if method == "assertRaises" and len(call.args) >= 2:
        shown = f"{src(call.args[1])}({', '.join(src(a) for a in call.args[2:])})"
        return {"call": shown, "expected": f"raises {src(call.args[0])}", "got": "no exception"}
    if isinstance(stmt, ast.With) and issubclass(etype, AssertionError):
        expected = next((c for c in (i.context_expr for i in stmt.items) if isinstance(c, ast.Call) and c.args), None)
        inner = _first_call(stmt.body)
        if expected is not None and inner is not None:
            return {"call": src(inner), "expected": f"raises {src(expected.args[0])}", "got": "no exception"}
    inner = _first_call([stmt])
    if inner is not None and not issubclass(etype, AssertionError):
        return {"call": src(inner), "raised": f"{etype.__name__}"}
    return {}


def _actual_first(a, b):
    """The side of a comparison that computes (holds a call) is the actual value."""
    has_call = lambda n: any(isinstance(x, ast.Call) for x in ast.walk(n))  # noqa: E731
    return (b, a) if has_call(b) and not has_call(a) else (a, b)


def _first_call(body):
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute) and node.func.attr.startswith("assert")):
                return node
    return None


# ----------------------------------------------------------------------------- main
def main() -> int:
    cfg = json.loads(sys.argv[1])
    out = os.fdopen(int(sys.argv[2]), "w", buffering=1)
    sys.path[:0] = [os.path.abspath(p) for p in cfg.get("python_path", ["."])]
    sys.path.append(cfg["shim"])
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGALRM, _alarm)
    limit, failed = float(cfg.get("per_test_s", 5.0)), [0]

    runner = os.getpid()

    def emit(record: dict) -> None:
        if os.getpid() != runner:  # a child a test forked has returned into the runner: it ends here
            os._exit(1)
        failed[0] += record["outcome"] not in ("passed", "xfailed", "skipped")
        out.write(json.dumps(record) + "\n")

    by_file: dict[str, list[str]] = {}
    for sel in cfg.get("selectors") or discover("."):
        path, sep, rest = sel.partition("::")
        path = os.path.normpath(path)
        for f in discover(path) if os.path.isdir(path) else [path]:
            by_file.setdefault(f, []).append(path + sep + rest if f == path else f)
    for path, sels in by_file.items():
        run_file(path, sels, emit, limit)
    out.write(json.dumps({"done": True}) + "\n")
    return int(bool(failed[0]))


def run_file(path: str, selectors: list[str], emit, limit: float) -> None:
    if not os.path.isfile(path):
        for sel in selectors:
            emit({"id": sel, "outcome": "error", "error": f"no such test file: {path}"})
        return
    try:
        module = import_file(path)
        fixtures = {**conftest_fixtures(path), **fixtures_of(module)}
    except BaseException as e:  # noqa: BLE001 - a file that does not import fails every test it holds
        for sel in selectors:
            emit({"id": sel, "outcome": "error", **describe((type(e), e, e.__traceback__), path),
                  "error": _short(f"collecting {path}: {type(e).__name__}: {e}")})
        return
    chosen, missing = select(items_of(module, path), selectors)
    for sel in missing:
        emit({"id": sel, "outcome": "error", "error": f"no test named {sel}"})
    for _, group in itertools.groupby(chosen, key=lambda item: item[1][1] if item[1][0] == "unittest" else id(item)):
        group = list(group)
        if group[0][1][0] == "unittest":
            run_unittest(group[0][1][1], {item[1][2]: item[0] for item in group}, emit, limit, path)
        else:
            run_plain(group[0][0], group[0][1], fixtures, emit, limit, path)


if __name__ == "__main__":
    sys.exit(main())
