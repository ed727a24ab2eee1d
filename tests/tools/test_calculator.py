from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.tools import calculator, safe_eval
from agentic_rl.tools.calculator import MAX_LENGTH


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("323 + 242 * 27", "6857"),  # 242 * 27 = 6534 first (precedence), + 323 = 6857
        ("(323 + 242) * 27", "15255"),  # 565 * 27 = 15255
        ("24 * 36 - 415", "449"),  # 864 - 415
        ("-5 + 2", "-3"),  # unary minus binds to the literal
        ("-(3 + 4) * 2", "-14"),  # -(7) * 2
        ("+7", "7"),
        ("2 ** 10", "1024"),
        ("2 ** -2", "0.25"),  # 1 / 4
        ("-2 ** 2", "-4"),  # Python precedence: -(2 ** 2)
        ("17 // 5", "3"),
        ("17 % 5", "2"),  # 17 = 3 * 5 + 2
        ("1,200 * 3", "3600"),  # thousands separator stripped: 1200 * 3
        ("1,200,000 / 4", "300000"),
        ("12 × 34", "408"),  # typographic times
        ("100 ÷ 8", "12.5"),  # typographic division
        ("50 − 8", "42"),  # typographic minus (U+2212)
        ("  6*7  ", "42"),  # surrounding whitespace
        ("1_000 + 1", "1001"),  # Python digit separators are plain int literals
    ],
)
def test_calculator_values(expression: str, expected: str) -> None:
    assert calculator(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("7 / 7", "1"),  # integer-valued float prints as an int
        ("7 / 2", "3.5"),
        ("1 / 3", "0.333333"),  # rounded to 6 decimals
        ("2 / 3", "0.666667"),  # 0.6666666... rounds up
        ("1 / 1000000", "0.000001"),  # fixed point, never "1e-06"
        ("1 / 10000000", "0"),  # below 6 decimals rounds to 0 ...
        ("-1 / 10000000", "0"),  # ... without a "-0"
        ("0.1 + 0.2", "0.3"),  # float noise 0.30000000000000004 rounded away
        ("-7 / 2", "-3.5"),
        ("7.5 // 2", "3"),  # float floor division is 3.0
        ("2.50 * 2", "5"),
    ],
)
def test_calculator_float_formatting(expression: str, expected: str) -> None:
    assert calculator(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('ls')",
        "os",
        "x + 1",
        "abs(-3)",
        "(1).real",
        "[1, 2]",
        "1, 2",  # not a thousands separator: two digits after the comma
        "'a' * 3",
        "True + 1",
        "1j * 2",
        "lambda: 1",
        "1 if 1 else 2",
        "2 ^ 3",
        "1 << 4",
        "1 < 2",
        "10 ** 100",  # exponent over the limit
        "2 ** 17",
        "1000001 ** 2",  # base over the limit
        "(-8) ** 0.5",  # complex result
        "10 ** 15 + 1",  # over the magnitude limit
        "1e300 * 1e300",
        "1e999",
        "1 / 0",
        "1 // 0",
        "5 % 0",
        "0 ** -1",
        "",
        "   ",
        "1 +",
        "((1)",
        "1" * (MAX_LENGTH + 1),
        "\x00",
    ],
)
def test_calculator_errors(expression: str) -> None:
    result = calculator(expression)
    assert result.startswith("Error: ")
    with pytest.raises(ValueError):
        safe_eval(expression)


@pytest.mark.parametrize("value", [None, 5, 3.5, b"1+1", ["1+1"], {"expression": "1"}])
def test_calculator_non_string_input(value: object) -> None:
    assert calculator(value).startswith("Error: expression must be a string")  # type: ignore[arg-type]


def test_error_reasons_are_specific() -> None:
    assert calculator("1 / 0") == "Error: division by zero"
    assert calculator("2 ^ 3") == "Error: '^' is not supported; use ** for powers"
    assert calculator("x").startswith("Error: unknown name 'x'")
    assert "too long" in calculator("1" * (MAX_LENGTH + 1))
    assert "exponent" in calculator("10 ** 100")
    # A unit or noun carried into the call is named, first word first; other syntax errors are not.
    assert calculator("86 * 159 km").startswith("Error: 'km' is a word: leave words and units out")
    assert calculator("9904 + 3819 blue beads").startswith("Error: 'blue' is a word")
    assert calculator("2 +* 3").startswith("Error: invalid syntax; only numbers")


def test_safe_eval_reason_matches_calculator() -> None:
    with pytest.raises(ValueError, match="division by zero"):
        safe_eval("3 / (2 - 2)")
    assert safe_eval("7 * 6") == 42
    assert isinstance(safe_eval("7 * 6"), int)  # integer arithmetic stays exact


def test_limits_are_inclusive() -> None:
    assert calculator("2 ** 16") == "65536"  # exponent exactly at the limit
    assert calculator("1000000 ** 2") == "1000000000000"  # base exactly at the limit: 10**12
    assert calculator("10 ** 15") == "1000000000000000"  # magnitude exactly at the limit
    assert calculator("+".join(["1"] * 100)) == "100"  # 199 characters, under the length limit


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert calculator("-" * 150 + "1") == "1"  # 150 unary minuses: an even count
    assert calculator("(" * 100 + "1" + ")" * 100).startswith("Error: ")  # over the length limit


# Invariant: the tool never raises, whatever the model sends; it returns a number or an error message.
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_any_text(text: str) -> None:
    result = calculator(text)
    assert isinstance(result, str)
    assert result.startswith("Error: ") or float(result) == float(result)


# Invariant: same as above, but on strings made of arithmetic characters, which reach the evaluator
# far more often than arbitrary text does; successful results must agree with safe_eval.
@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789+-*/%(). ,e×÷−", max_size=40))
def test_never_raises_on_arithmetic_like_text(text: str) -> None:
    result = calculator(text)
    if not result.startswith("Error: "):
        assert abs(float(result) - safe_eval(text)) <= 5e-7  # only 6-decimal rounding separates them


# Invariant: integer products and sums within the magnitude limit are exact (no float round-trip).
@given(st.integers(-(10**7), 10**7), st.integers(-(10**7), 10**7))
def test_integer_arithmetic_is_exact(a: int, b: int) -> None:
    assert calculator(f"{a} * {b}") == str(a * b)  # |a * b| <= 10**14, within the limit
    assert calculator(f"{a} + {b}") == str(a + b)
    assert calculator(f"{a} - ({b})") == str(a - b)


# Invariant: integer division results that are whole print without a decimal point.
@given(st.integers(1, 10**6), st.integers(1, 10**6))
def test_exact_division_prints_an_int(quotient: int, divisor: int) -> None:
    assert calculator(f"{quotient * divisor} / {divisor}") == str(quotient)
