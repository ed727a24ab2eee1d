# `from __future__ import annotations` makes every annotation below a string, so these tests also
# check that function_schema resolves string annotations instead of reading them literally.
from __future__ import annotations

from typing import Any, Literal, Optional

import pytest

from agentic_rl.tools import calculator, function_schema
from agentic_rl.tools.schema import validate_arguments


def test_calculator_schema() -> None:
    assert function_schema(calculator) == {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression and return the result. "
            'Supports numbers, + - * / // % ** and parentheses, e.g. "24 * 36 - 415".',
            "parameters": {
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": 'The arithmetic expression to evaluate, e.g. "(12 + 7) * 3".',
                    }
                },
                "required": ["expression"],
            },
        },
    }


def search(  # noqa: PLR0913 - a tool of many parameters is what this derives a schema of
    query: str,
    limit: int = 5,
    threshold: float | None = None,
    mode: Literal["fast", "exact"] = "fast",
    tags: list[str] | None = None,
    weights: list = None,  # noqa: RUF013 - a bare list, deliberately unparameterised
    filters: dict[str, Any] | None = None,
    strict: bool = False,
    page: Optional[int] = None,  # noqa: UP045 - the typing.Optional spelling is what this checks
    level: Literal[1, 2, 3] = 1,
    cutoff: Optional[float] = 0.5,  # noqa: UP045
) -> list[str]:
    """Search the index for documents.

    Results are ranked by score.

    Args:
        query (str): What to look for.
        limit: How many results
            to return at most.
        mode: Ranking mode.

    Returns:
        The matching document ids.
    """
    return []


def test_schema_types_defaults_and_descriptions() -> None:
    fn = function_schema(search)["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the index for documents. Results are ranked by score."
    props = fn["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "description": "How many results to return at most."}
    assert props["threshold"] == {"type": "number", "description": ""}  # float | None -> number
    assert props["mode"] == {"type": "string", "enum": ["fast", "exact"], "description": "Ranking mode."}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": ""}
    assert props["weights"] == {"type": "array", "description": ""}
    assert props["filters"] == {"type": "object", "description": ""}
    assert props["strict"] == {"type": "boolean", "description": ""}
    assert props["page"] == {"type": "integer", "description": ""}
    assert props["level"] == {"type": "integer", "enum": [1, 2, 3], "description": ""}
    assert props["cutoff"] == {"type": "number", "description": ""}
    assert fn["parameters"]["required"] == ["query"]


def test_optional_without_default_is_required() -> None:
    def f(x: int | None) -> None:
        """Do it."""

    schema = function_schema(f)["function"]["parameters"]
    assert schema["properties"]["x"]["type"] == "integer"
    assert schema["required"] == ["x"]
    assert validate_arguments(f, {"x": None}) is None  # but None is an accepted value


def test_no_docstring_gives_empty_descriptions() -> None:
    def f(x: int) -> None:
        pass

    fn = function_schema(f)["function"]
    assert fn["description"] == ""
    assert fn["parameters"]["properties"]["x"] == {"type": "integer", "description": ""}


def test_returned_schema_is_a_copy() -> None:
    function_schema(search)["function"]["parameters"]["properties"]["tags"]["items"]["type"] = "mutated"
    assert function_schema(search)["function"]["parameters"]["properties"]["tags"]["items"] == {
        "type": "string"
    }


def test_unannotated_parameter_is_a_type_error() -> None:
    def f(x, y: int) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TypeError, match="'x'"):
        function_schema(f)


def test_varargs_are_type_errors() -> None:
    def f(*args: int) -> None:
        pass

    def g(**kwargs: int) -> None:
        pass

    with pytest.raises(TypeError, match="args"):
        function_schema(f)
    with pytest.raises(TypeError, match="kwargs"):
        function_schema(g)


def test_unsupported_type_is_a_type_error() -> None:
    class Point:
        pass

    def f(p: Point) -> None:
        pass

    with pytest.raises(TypeError, match="p"):
        function_schema(f)


def test_validate_accepts_good_arguments() -> None:
    assert validate_arguments(calculator, {"expression": "1 + 1"}) is None
    assert validate_arguments(search, {"query": "x", "limit": 3, "threshold": 2, "tags": ["a"]}) is None
    assert (
        validate_arguments(search, {"query": "x", "threshold": None, "mode": "exact", "strict": True}) is None
    )


def test_validate_unknown_argument() -> None:
    assert (
        validate_arguments(calculator, {"expr": "1"})
        == "unknown argument 'expr' for calculator; expected: expression"
    )
    message = validate_arguments(calculator, {"expr": "1", "x": 2})
    assert message == "unknown arguments 'expr', 'x' for calculator; expected: expression"


def test_validate_missing_argument() -> None:
    assert validate_arguments(calculator, {}) == "missing required argument 'expression' for calculator"


def test_validate_wrong_types() -> None:
    assert (
        validate_arguments(calculator, {"expression": 12})
        == "argument 'expression' for calculator must be a string, got integer 12"
    )
    # bool is not an integer even though Python's bool subclasses int
    assert "must be an integer, got boolean true" in validate_arguments(search, {"query": "q", "limit": True})
    # a float is not an integer, even a whole one
    assert "must be an integer" in validate_arguments(search, {"query": "q", "limit": 3.0})
    # an int is an acceptable number
    assert validate_arguments(search, {"query": "q", "threshold": 3}) is None
    assert "must be one of" in validate_arguments(search, {"query": "q", "mode": "slow"})
    assert "array of string values" in validate_arguments(search, {"query": "q", "tags": ["a", 1]})
    assert "must be an object" in validate_arguments(search, {"query": "q", "filters": []})
    assert "must be an integer" in validate_arguments(search, {"query": "q", "page": "2"})


def test_validate_non_object_arguments() -> None:
    assert validate_arguments(calculator, "1 + 1") == (
        "arguments for calculator must be a JSON object, got string; expected: expression"
    )


def test_validate_long_values_are_shortened() -> None:
    message = validate_arguments(calculator, {"expression": list(range(100))})
    assert message is not None and len(message) < 150
