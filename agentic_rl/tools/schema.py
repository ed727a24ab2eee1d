"""OpenAI-style tool schemas derived from a typed Python function and its Google-style docstring.

The function is the single source of truth: its signature gives names, types and which arguments are
required; its docstring gives the descriptions the model reads. `validate_arguments` checks a parsed
tool call against the same information and returns a short message meant to be shown to the model.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

_SIMPLE_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAY_TYPES = (list, tuple, set, frozenset)
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns?|Raises|Yields?|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def function_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """Build `{"type": "function", "function": {...}}` for `fn`; raises TypeError if it cannot be typed."""
    params = copy.deepcopy(_parameters(fn))  # callers may mutate the result; the cache must not see it
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    properties = {
        name: {**schema, "description": arg_docs.get(name, "")} for name, (schema, _, _) in params.items()
    }
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": summary,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [name for name, (_, _, required) in params.items() if required],
            },
        },
    }


@functools.lru_cache(maxsize=256)
def _parameters(fn: Callable[..., Any]) -> dict[str, tuple[dict[str, Any], bool, bool]]:
    """name -> (JSON schema, None allowed, required), in signature order; cached: called per tool call."""
    try:
        hints = typing.get_type_hints(fn)
    except NameError as err:  # a string annotation naming something not importable here
        raise TypeError(f"{fn.__name__}: cannot resolve type annotations ({err})") from None
    result = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"{fn.__name__}: *args/**kwargs parameter '{name}' cannot be described in a schema"
            )
        if name not in hints:
            raise TypeError(f"{fn.__name__}: parameter '{name}' has no type annotation")
        schema, nullable = _json_schema(hints[name], f"{fn.__name__}.{name}")
        result[name] = (schema, nullable, param.default is param.empty)
    return result


def _json_schema(tp: Any, where: str) -> tuple[dict[str, Any], bool]:
    """JSON schema for a type annotation, and whether None is an accepted value."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[tp]}, False
    if tp is Any:
        return {}, True
    if tp is type(None):
        return {"type": "null"}, True
    if origin in (Union, types.UnionType):
        return _union_schema(args, where)
    if origin is Literal:
        return _literal_schema(args), None in args
    if tp in _ARRAY_TYPES or origin in _ARRAY_TYPES:
        item_args = [a for a in args if a is not Ellipsis]
        if len(item_args) != 1:  # bare list, or a fixed-length tuple: no single item type to state
            return {"type": "array"}, False
        return {"type": "array", "items": _json_schema(item_args[0], where)[0]}, False
    if tp is dict or origin in (dict, Mapping) or tp is Mapping:
        return {"type": "object"}, False
    raise TypeError(f"{where}: unsupported type annotation {tp!r}")


def _union_schema(args: tuple[Any, ...], where: str) -> tuple[dict[str, Any], bool]:
    nullable = type(None) in args
    members = [_json_schema(a, where)[0] for a in args if a is not type(None)]
    if len(members) == 1:
        return members[0], nullable
    if {m.get("type") for m in members} == {"integer", "number"} and all(len(m) == 1 for m in members):
        return {"type": "number"}, nullable  # int | float is just a JSON number
    return {"anyOf": members}, nullable


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    enum = [v for v in values if v is not None]
    kinds = {_json_type(v) for v in enum}
    return {"type": kinds.pop(), "enum": enum} if len(kinds) == 1 else {"enum": enum}


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary before the first section, {arg name: description}) from a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section, current = None, None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
        elif section is None:
            summary.append(line.strip())
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            entry = _ARG_LINE.match(line.strip())
            # Continuation lines are indented deeper than the entry they continue.
            if entry and (current is None or indent <= args[current][0]):
                current = entry.group(1).lstrip("*")
                args[current] = (indent, entry.group(2).strip())
            elif current is not None:
                args[current] = (args[current][0], f"{args[current][1]} {line.strip()}".strip())
    return " ".join(" ".join(summary).split()), {name: text for name, (_, text) in args.items()}


def _json_type(value: Any) -> str:
    """The JSON type of a parsed JSON value; bool is checked first because it subclasses int."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _matches(value: Any, schema: Mapping[str, Any]) -> bool:
    if "anyOf" in schema:
        return any(_matches(value, s) for s in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    expected, actual = schema.get("type"), _json_type(value)
    if expected is None:
        return True
    if expected != actual and not (expected == "number" and actual == "integer"):
        return False
    items = schema.get("items")
    return items is None or all(_matches(v, items) for v in value)


def _describe(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(_short(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    kind = schema.get("type", "any value")
    if kind == "array" and "items" in schema:
        return f"an array of {schema['items'].get('type', 'any')} values"
    return f"an {kind}" if kind in ("integer", "array", "object") else f"a {kind}"


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, default=str)  # JSON spelling (true, null), as the model wrote it
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def validate_arguments(fn: Callable[..., Any], arguments: Any) -> str | None:
    """Check parsed tool-call arguments against `fn`'s signature; a short message for the model, or None."""
    name = fn.__name__
    params = _parameters(fn)
    expected = ", ".join(params) or "no arguments"
    if not isinstance(arguments, Mapping):
        return (
            f"arguments for {name} must be a JSON object, got {_json_type(arguments)}; expected: {expected}"
        )
    unknown = [k for k in arguments if k not in params]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        return f"unknown argument{plural} {_names(unknown)} for {name}; expected: {expected}"
    missing = [k for k, (_, _, required) in params.items() if required and k not in arguments]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        return f"missing required argument{plural} {_names(missing)} for {name}"
    problems = [
        f"argument '{k}' for {name} must be {_describe(schema)}, got {_json_type(v)} {_short(v)}"
        for k, v in arguments.items()
        for schema, nullable, _ in [params[k]]
        if not (v is None and nullable) and not _matches(v, schema)
    ]
    return "; ".join(problems) or None
