"""The calculator task of the TRL comparison: seeded arithmetic tasks, a safe calculator tool, the reward.

    >>> train_tasks(1)[0]["question"], train_tasks(1)[0]["answer"]
    >>> calculator("347 * 29 + 118")                   # '10181'
    >>> correct("... <answer>10181</answer>", 10181)   # 1.0

Pure Python (no torch, no trl): benchmarks/bench_grpo_step.py imports it in our venv for the same train
tasks and reward, and benchmarks/trl_harness/grpo_calculator.py imports it in TRL's venv. The train split is
`make_tasks(n, seed=0)`; a task is "What is <expression>?" over 2-3 operands of 1-3 digits and + - *.
"""

from __future__ import annotations

import ast
import operator
import random
import re

TRAIN_SEED = 0
OPS = ["+", "-", "*"]


def _expression(rng: random.Random) -> str:
    # The order of the draws fixes the task stream: operand count, then each operand (digits, value),
    # then one operator per operand after the first.
    operands = []
    for _ in range(rng.choice([2, 3])):
        digits = rng.choice([1, 2, 3])
        low = 1 if digits == 1 else 10 ** (digits - 1)
        operands.append(rng.randint(low, 10**digits - 1))
    text = str(operands[0])
    for x in operands[1:]:
        text += f" {rng.choice(OPS)} {x}"
    return text


def make_tasks(n: int, seed: int) -> list[dict]:
    """n distinct tasks {"id", "question", "expression", "answer" (int)}, deterministic in (n, seed)."""
    rng = random.Random(seed)
    tasks: list[dict] = []
    seen: set[str] = set()
    while len(tasks) < n:
        expression = _expression(rng)
        if expression in seen:
            continue
        seen.add(expression)
        tasks.append({"id": f"s{seed}-{len(tasks)}", "question": f"What is {expression}?",
                      "expression": expression, "answer": int(safe_eval(expression))})
    return tasks


def train_tasks(n: int = 2000) -> list[dict]:
    return make_tasks(n, TRAIN_SEED)


# --------------------------------------------------------------------------------------------- calculator
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_LEN = 200
_MAX_ABS = 10**15


def _evaluate(node):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 16 or abs(left) > 10**6):
            raise ValueError("exponent too large")
        value = _BINARY[type(node.op)](left, right)
        if abs(value) > _MAX_ABS:
            raise ValueError("result too large")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported syntax: {type(node).__name__}")


def safe_eval(expression: str):
    """Numbers, + - * / // % **, unary +/- and parentheses, walked over the AST (never `eval`).

    Anything else (names, calls, attributes, strings, ...) raises ValueError.
    """
    if not isinstance(expression, str):
        raise ValueError("expression must be a string")
    expression = expression.strip().replace("×", "*").replace("÷", "/").replace("−", "-")
    if len(expression) > _MAX_LEN:
        raise ValueError("expression too long")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"invalid expression: {e.msg}") from None
    try:
        return _evaluate(tree)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None


def calculator(expression: str) -> str:
    """
    Evaluate an arithmetic expression and return the result.

    Args:
        expression: The arithmetic expression to evaluate, e.g. "347 * 29 + 118". Supports + - * / and parentheses.

    Returns:
        The numeric result as a string, or an error message.
    """
    # The docstring is the tool's schema: transformers' get_json_schema renders it into the prompt
    # (and needs the Google-style `Args:` entry), so its wording is part of the benchmark's prompt.
    try:
        value = safe_eval(expression)
    except ValueError as e:
        return f"Error: {e}"
    if isinstance(value, float):
        if not value.is_integer():
            return repr(round(value, 6))
        value = int(value)
    return str(value)


# ------------------------------------------------------------------------------------------------- reward
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"-?\d[\d,]*")


def _last_integer(text: str) -> int | None:
    found = _INTEGER.findall(text)
    if not found:
        return None
    try:
        return int(found[-1].replace(",", ""))
    except ValueError:
        return None


def _to_int(text: str) -> int | None:
    text = text.strip().replace(",", "").rstrip(".")
    whole = re.fullmatch(r"\s*(-?\d+)(?:\.0+)?\s*", text)
    if whole:
        return int(whole.group(1))
    return _last_integer(text)  # e.g. "<answer>x = 42</answer>"


def extract_answer(text: str) -> int | None:
    """The content of the last <answer>...</answer> if there is one, else the last integer in the text."""
    if not text:
        return None
    tags = _ANSWER.findall(text)
    return _to_int(tags[-1]) if tags else _last_integer(text)


def correct(text: str, answer: int) -> float:
    """1.0 iff the final answer in `text` (the last assistant message) equals `answer`, else 0.0."""
    got = extract_answer(text)
    return 1.0 if got is not None and got == int(answer) else 0.0


def last_assistant_text(messages) -> str:
    """The text of a conversation's last assistant message (TRL passes completions as message lists)."""
    if isinstance(messages, str):
        return messages
    for message in reversed(messages):
        if message.get("role") == "assistant":
            content = message.get("content") or ""
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content
    return ""


if __name__ == "__main__":
    assert calculator("347 * 29 + 118") == str(347 * 29 + 118)
    assert calculator("__import__('os')").startswith("Error")
    assert calculator("2**1000").startswith("Error")
    assert calculator("7/2") == "3.5"
    assert correct("so <answer>10181</answer>", 10181) == 1.0
    assert correct("<answer>1</answer> then 10181", 10181) == 0.0
    assert correct("The answer is 10,181.", 10181) == 1.0
    assert correct("It is -5", -5) == 1.0
    assert correct("no number", 3) == 0.0
    print(train_tasks(3))
    print("self-test ok")
