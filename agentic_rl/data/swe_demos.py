"""Demonstrations for the SFT cold start of swe_repair: the way a careful engineer fixes a shipped
instance, replayed through the env's own tools so every observation is the real one.

Run the failing test the issue names; search for the function the bug is in; read the lines around
it; edit (the inverse of the mutation: the mutated lines back to the original ones, an exact
search/replace); run the test files of the failing tests (their pass-to-pass tests with them); submit. Six actions, each a
single tool call. A user's instances carry no mutation, so they have no demonstration.
"""

from __future__ import annotations

import ast

from agentic_rl.data.swe_instances import instance_of
from agentic_rl.types import Task


def demonstration(task: Task, env) -> list[dict]:
    inst = instance_of(task)
    if inst.mutation is None:
        raise ValueError(f"{inst.instance_id}: a user's instance has no known fix to demonstrate")
    m = inst.mutation
    env.reset(task)
    function = enclosing_function(inst.files()[m.file], m.line)
    first = inst.FAIL_TO_PASS[0]
    span = m.after.count("\n") + 1
    steps = [
        ("The issue names a failing test. Let me run it first.", "run_tests", {"tests": first}),
        (f"The failure goes through `{function}`. Let me find it." if function else "Let me find the code.",
         "search", {"pattern": f"def {function}(" if function else m.after.strip().splitlines()[0].strip(),
                    "path": "."}),
        ("Let me read the code around it.", "read_file",
         {"path": m.file, "start": max(1, m.line - 6), "end": m.line + span + 5}),
        ("I see the bug. Fixing it.", "edit", {"path": m.file, "old": m.after, "new": m.before}),
        ("Now the tests should pass.", "run_tests",
         {"tests": " ".join(sorted({t.split("::")[0] for t in inst.FAIL_TO_PASS}))}),
        ("The tests pass. Submitting the fix.", "submit", {}),
    ]
    messages: list[dict] = []
    for thought, name, args in steps:
        messages.append({"role": "assistant", "content": thought,
                         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]})
        if name != "submit":  # submitting ends the episode: its result is never shown
            messages.append({"role": "tool", "name": name, "content": getattr(env, name)(**args)})
    return messages


def enclosing_function(source: str, line: int) -> str:
    """The innermost function (or class) whose body holds `line`; "" at module level."""
    best, size = "", None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if size is None or node.end_lineno - node.lineno < size:
                best, size = node.name, node.end_lineno - node.lineno
    return best

