"""A safe arithmetic calculator tool: parses with `ast`, evaluates only a whitelisted arithmetic subset.

The result string is what the model reads back as the tool observation, so it is kept short and
stable (integers without ".0", floats rounded), and every failure is a readable "Error: ..." string
instead of an exception: a bad tool call must become an observation, never crash a rollout worker.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

MAX_LENGTH = 200
MAX_MAGNITUDE = 10**15
MAX_EXPONENT = 16
MAX_POWER_BASE = 10**6

_BINARY_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
# Symbols a model plausibly types for operators Python spells differently: name them in the error.
_OPERATOR_HINTS: dict[type, str] = {ast.BitXor: "'^' is not supported; use ** for powers"}
_ALLOWED = "only numbers, + - * / // % **, and parentheses are allowed"

_UNICODE_OPERATORS = str.maketrans({"×": "*", "÷": "/", "−": "-"})
# A comma between digits followed by exactly three digits is a thousands separator ("1,200");
# anything else ("1,2") is left alone so it fails loudly rather than being silently misread.
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters


def normalize(expression: str) -> str:
    """Rewrite typographic operators and thousands separators into plain Python arithmetic."""
    return _THOUSANDS_COMMA.sub("", expression.translate(_UNICODE_OPERATORS)).strip()


def safe_eval(expression: str) -> int | float:
    """Evaluate an arithmetic expression, raising `ValueError` with a short reason on any bad input."""
    if not isinstance(expression, str):
        raise ValueError(f"expression must be a string, got {type(expression).__name__}")
    text = normalize(expression)
    if not text:
        raise ValueError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"expression too long (max {MAX_LENGTH} characters)")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError):
        raise ValueError(_describe_syntax_error(text)) from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("result too large") from None
    except RecursionError:
        raise ValueError("expression is nested too deeply") from None


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        value = node.value
        # bool is an int subclass and complex is a number, but neither is arithmetic we support.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"unsupported value {value!r}; {_ALLOWED}")
        return _checked(value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        return _checked(_UNARY_OPS[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _checked(_BINARY_OPS[type(node.op)](left, right))
    raise ValueError(_describe_unsupported(node))


def _check_power(base: float, exponent: float) -> None:
    # Bound the work before computing: 10**100000 would otherwise be computed in full.
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent too large (max {MAX_EXPONENT})")
    if abs(base) > MAX_POWER_BASE:
        raise ValueError(f"base of a power too large (max {MAX_POWER_BASE:,})")


def _checked(value: object) -> int | float:
    # (-8) ** 0.5 is a complex number in Python; reject it rather than print "(1.7+3j)".
    if isinstance(value, complex) or not isinstance(value, int | float):
        raise ValueError("result is not a real number")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError("result is not a number")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"number too large (max {MAX_MAGNITUDE:,})")
    return value


def _describe_syntax_error(text: str) -> str:
    """A trained policy's commonest malformed call carries the unit or noun of its sentence into the
    call ("86 * 159 km"): name the word, so the error says what to take out."""
    word = _WORD.search(text)
    if word:
        return f"'{word[0]}' is a word: leave words and units out; {_ALLOWED}"
    return "invalid syntax; " + _ALLOWED


def _describe_unsupported(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"unknown name '{node.id}'; {_ALLOWED}"
    if isinstance(node, ast.Call):
        return f"function calls are not allowed; {_ALLOWED}"
    if isinstance(node, ast.Attribute):
        return f"attribute access is not allowed; {_ALLOWED}"
    op = getattr(node, "op", None)
    if op is not None and type(op) in _OPERATOR_HINTS:
        return _OPERATOR_HINTS[type(op)]
    return f"unsupported syntax ({type(node).__name__}); {_ALLOWED}"


def format_number(value: int | float) -> str:
    """Integer-valued results print as integers ("1" for 7/7), others with at most 6 decimals."""
    rounded = round(value, 6)
    if rounded == int(rounded):
        return str(int(rounded))
    # Fixed-point rather than repr, which would print 1e-06 for a millionth.
    return f"{rounded:.6f}".rstrip("0").rstrip(".")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Supports numbers, + - * / // % ** and parentheses, e.g. "24 * 36 - 415".

    Args:
        expression: The arithmetic expression to evaluate, e.g. "(12 + 7) * 3".

    Returns:
        The numeric result as text, or a message starting with "Error: " if the expression is invalid.
    """
    try:
        return format_number(safe_eval(expression))
    except ValueError as err:
        return f"Error: {err}"
    except Exception as err:  # the tool must never raise into the rollout loop
        return f"Error: could not evaluate expression ({type(err).__name__})"
