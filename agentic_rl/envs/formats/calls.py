"""Parsers for the tool-call syntaxes model families write, beside hermes' `<tool_call>` JSON.

Each accepts what vLLM's tool parser for the family accepts, and turns everything else into error
messages the model reads as its observation (never an exception):

  LlamaJsonCalls  `{"name": ..., "parameters": {...}}` (or `"arguments"`), optionally after
                  `<|python_tag|>`, several separated by `;` (vLLM `llama3_json`); the built-in
                  tool form `<|python_tag|>name.call(key=value)` too
  MistralCalls    `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` (vLLM `mistral`)
  PythonicCalls   Gemma's ```tool_code``` block of Python calls `name(key=value)`, or a bare list
                  `[name(key=value), ...]` as the whole action (vLLM `pythonic`)

`prose(text)` is the text in front of the calls (an OpenAI message's `content`); `call_openers` are
the strings where a call may start, so the text before the first of them is prose whatever follows
(what a streamed reply may send before its end, `engines/sse.py`).
Pure strings, no torch.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from agentic_rl.envs.formats.base import ParsedAction
from agentic_rl.envs.formats.hermes import short_error, to_call
from agentic_rl.types import ToolCall

PYTHON_TAG = "<|python_tag|>"
TOOL_CALLS = "[TOOL_CALLS]"
TOOL_CODE_OPEN, CODE_FENCE = "```tool_code", "```"
_JSON_CALL = re.compile(r'\{\s*"name"\s*:')
_LITERALS = {"true": True, "false": False, "null": None, "none": None}


def _result(calls: list[ToolCall], errors: list[str]) -> ParsedAction:
    return ParsedAction(tuple(calls), tuple(errors), attempted=bool(calls or errors))


def _json_objects(text: str, sep: str) -> list[Any]:
    """JSON values one after another, `sep` between them (whitespace around it allowed)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while True:
        try:
            value, i = decoder.raw_decode(text, len(text) - len(text[i:].lstrip()))
        except (json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"tool call is not valid JSON ({short_error(e)})") from None
        out.append(value)
        rest = text[i:].lstrip()
        if not rest.startswith(sep) or not sep:
            return out
        i = len(text) - len(rest) + len(sep)


@dataclass(frozen=True)
class LlamaJsonCalls:
    ends: tuple[str, ...] = ("<|eot_id|>", "<|eom_id|>")
    call_openers = (PYTHON_TAG, "{")  # where a call may start: `prose` is the text before

    def _start(self, text: str) -> int:
        match = _JSON_CALL.search(text)
        tag = text.find(PYTHON_TAG)
        found = [i for i in (tag, match.start() if match else -1) if i >= 0]
        return min(found) if found else -1

    def prose(self, text: str) -> str:
        start = self._start(text)
        return text if start < 0 else text[:start].rstrip()

    def parse(self, text: str) -> ParsedAction:
        start = self._start(text)
        if start < 0:
            return ParsedAction()
        body = text[start:]
        for end in self.ends:
            body = body.split(end, 1)[0]
        body = body.removeprefix(PYTHON_TAG).strip()
        if not body.startswith("{"):  # a built-in tool: <|python_tag|>brave_search.call(query="...")
            return _pythonic(body, method="call")
        try:
            items = _json_objects(body, ";")
            return _result([_llama_call(item) for item in items], [])
        except ValueError as e:
            return _result([], [str(e)])


def _llama_call(item: Any) -> ToolCall:
    if isinstance(item, dict) and "parameters" in item:
        if "arguments" in item:
            raise ValueError('a tool call has both "parameters" and "arguments": write one')
        item = {**item, "arguments": item["parameters"]}
    return to_call(item)


@dataclass(frozen=True)
class MistralCalls:
    call_openers = (TOOL_CALLS,)
    def prose(self, text: str) -> str:
        return text.split(TOOL_CALLS, 1)[0].rstrip()

    def parse(self, text: str) -> ParsedAction:
        if TOOL_CALLS not in text:
            return ParsedAction()
        calls, errors = [], []
        for segment in text.split(TOOL_CALLS)[1:]:
            try:
                payload = _json_objects(segment, "")[0]
                items = payload if isinstance(payload, list) else [payload]
                if not items:
                    raise ValueError("empty tool call list")
                calls += [to_call(item) for item in items]
            except ValueError as e:
                errors.append(str(e))
        return _result(calls, errors)


@dataclass(frozen=True)
class PythonicCalls:
    call_openers = (TOOL_CODE_OPEN, "[")  # "[": a bare list of calls is the whole action
    def prose(self, text: str) -> str:
        if TOOL_CODE_OPEN in text:
            return text.split(TOOL_CODE_OPEN, 1)[0].rstrip()
        return "" if _bare_list(text) else text

    def parse(self, text: str) -> ParsedAction:
        if TOOL_CODE_OPEN not in text:
            bare = _bare_list(text)
            return _pythonic(bare) if bare else ParsedAction()
        calls, errors = [], []
        for block in text.split(TOOL_CODE_OPEN)[1:]:
            if CODE_FENCE not in block:
                errors.append("tool_code block not closed: end it with ``` on its own line")
                continue
            parsed = _pythonic(block.split(CODE_FENCE, 1)[0].strip())
            calls += parsed.tool_calls
            errors += parsed.errors
        return _result(calls, errors)


def _bare_list(text: str) -> str:
    """The action as vLLM's pythonic parser reads it: nothing but `[call(...), ...]`."""
    body = text.strip()
    for end in ("<end_of_turn>", "<|eot_id|>"):
        body = body.removesuffix(end).rstrip()
    return body if body.startswith("[") and body.endswith(")]") else ""


def _pythonic(source: str, method: str = "") -> ParsedAction:
    """Python calls `name(key=literal, ...)`: one a line, or one list of them. `method`: the
    attribute a call goes through (`name.call(...)`, Llama's built-in tools)."""
    try:
        tree = ast.parse(source, mode="exec")
        nodes = [stmt.value for stmt in tree.body if isinstance(stmt, ast.Expr)]
        if len(nodes) != len(tree.body) or not nodes:
            raise ValueError("a tool call must be a Python call such as name(key=value)")
        if len(nodes) == 1 and isinstance(nodes[0], ast.List):
            nodes = list(nodes[0].elts)
        return _result([_python_call(node, method) for node in nodes], [])
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        message = str(e) if isinstance(e, ValueError) else f"tool call is not valid Python ({short_error(e)})"
        return _result([], [message])


def _python_call(node: ast.AST, method: str) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise ValueError("a tool call must be a Python call such as name(key=value)")
    fn = node.func
    if method and isinstance(fn, ast.Attribute) and fn.attr == method:
        fn = fn.value
    if not isinstance(fn, ast.Name):
        raise ValueError("a tool call must name its function: name(key=value)")
    if node.args or any(k.arg is None for k in node.keywords):
        raise ValueError(f"call {fn.id} with keyword arguments only: {fn.id}(key=value)")
    return ToolCall(name=fn.id, arguments={k.arg: _literal(k.value, fn.id) for k in node.keywords})


def _literal(node: ast.AST, name: str) -> Any:
    if isinstance(node, ast.Name) and node.id.lower() in _LITERALS:  # JSON's spelling
        return _LITERALS[node.id.lower()]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise ValueError(f"arguments of {name} must be literals (strings, numbers, lists, dicts)") from None
