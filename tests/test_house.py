"""The house rules of README's Contributing section, measured on the package: files under 500 lines,
functions under 60 (ruff holds the parameter count and the complexity, 10: `make lint`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "agentic_rl"
OURS = [p for p in ROOT.rglob("*.py") if "swe_projects" not in p.parts]  # other projects' code, kept as published
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 60


def test_every_file_is_under_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in OURS if (n := p.read_text().count("\n")) > MAX_FILE_LINES}
    assert not long, f"split these by idea: {long}"


def test_every_function_is_under_the_limit():
    long = {}
    for p in OURS:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"split these: {long}"
