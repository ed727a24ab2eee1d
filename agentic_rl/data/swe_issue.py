"""The issue a user would file for a mutant: written from what its failing tests saw — what the test
called, what it expected, what came back or what was raised — never from the diff or the changed
line (the test runner reads these off the test's own failing line, `tools/sandbox/repo_runner.py`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

OPENINGS = (
    "I think I found a bug in {project}.",
    "Something is off in {project}.",
    "{project} gives me a result I did not expect.",
    "Possible regression in {project}:",
    "",
)
CLOSINGS = (
    "Could you take a look?",
    "The test suite catches it too: `{test}` fails.",
    "Running `{test}` shows the failure.",
    "",
)


def problem_statement(project: str, failures: Sequence[Mapping], seed: int) -> str:
    """The issue text for the failing tests' records (`id`, `error`, `line`, `call`, `expected`,
    `got` / `raised`), the first two described, the count of the rest told."""
    rng = random.Random(seed)
    first = failures[0]
    parts = [_title(first), rng.choice(OPENINGS).format(project=project)]
    for record in failures[:2]:
        parts.append(_symptom(record))
    if len(failures) > 2:
        more = len(failures) - 2
        parts.append(f"{more} more test{'s fail' if more > 1 else ' fails'} the same way.")
    parts.append(rng.choice(CLOSINGS).format(test=first["id"]))
    return "\n\n".join(p for p in parts if p)


def _title(record: Mapping) -> str:
    call, test = _call(record), record["id"].split("::")[-1]
    if call and record.get("raised"):
        return f"`{call}` raises {record['raised']}"
    if call and str(record.get("expected", "")).startswith("raises "):
        return f"`{call}` does not raise {record['expected'][len('raises '):]}"
    if call and "got" in record:
        return f"`{call}` returns the wrong result"
    return f"{test} fails"


def _call(record: Mapping) -> str:
    """What the test called, when it is a call (a bare variable says nothing on its own)."""
    call = record.get("call") or ""
    return _one_line(call) if "(" in call else ""


def _symptom(record: Mapping) -> str:
    call, error, test = _call(record), record.get("error", ""), record["id"]
    expected = str(record.get("expected", ""))
    if call and record.get("raised"):
        return f"Calling `{call}` raises:\n```\n{error}\n```\n(seen in `{test}`)"
    if call and expected.startswith("raises "):
        return f"`{call}` should raise {expected[len('raises '):]}, but it returns normally (`{test}`)."
    if call and "got" in record and expected:
        return f"`{call}` gives `{record['got']}`, but `{expected}` is expected (`{test}`)."
    line = record.get("line")
    if line and "got" in record and expected:
        return (f"In `{test}`, `{record.get('call')}` is `{record['got']}` where `{expected}` is expected:\n"
                f"```\n{line}\n```")
    shown = f"{record.get('where', test)}: {line}\n{error}" if line else error
    return f"`{test}` fails:\n```\n{shown}\n```"


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def quotes_any(statement: str, lines: Sequence[str]) -> bool:
    """Does the statement contain one of these source lines (stripped)?"""
    return any(line.strip() and line.strip() in statement for line in lines)
