"""A plain-Python agent on the `openai` package, with function calling: it knows nothing of agentic-rl.

Trained through the recording proxy with `rollout.agent.program: examples/openai_calculator_agent.py:run`
(see recipes/proxy_calculator.yaml and docs/proxy.md). `run(task, base_url)` solves one arithmetic
word problem: it asks the model, runs the calculator calls the model makes, sends every reply back
exactly as it came, asks again for a final answer when a reply has none, and returns 1.0 when the answer is right.
"""

from __future__ import annotations

import ast
import json
import operator
import re

from openai import OpenAI

SYSTEM = ("You solve arithmetic word problems. Call the calculator tool for the arithmetic, then give the "
          "final answer as a number inside <answer></answer> tags.")
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression with + - * / and parentheses.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]
NUDGE = "Give the final answer as a number inside <answer></answer> tags."
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def run(task: dict, base_url: str, max_calls: int = 4) -> float:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["prompt"]}]
    for _ in range(max_calls):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # the reply sent back as it came
        if message.tool_calls:
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": calculate(call.function.arguments)})
            continue
        answer = final_answer(message.content or "")
        if answer is not None:
            return float(abs(answer - float(task["answer"])) < 1e-6 * max(1.0, abs(float(task["answer"]))))
        messages.append({"role": "user", "content": NUDGE})
    return 0.0


def final_answer(text: str) -> float | None:
    m = re.search(r"<answer>\s*(-?[\d,]*\.?\d+)\s*</answer>", text)
    return float(m.group(1).replace(",", "")) if m else None


def calculate(arguments: str) -> str:
    """The calculator tool: a number, or an error message the model reads."""
    try:
        expression = json.loads(arguments)["expression"]
        value = _eval(ast.parse(str(expression), mode="eval").body)
        return str(int(value) if float(value).is_integer() else round(value, 6))
    except Exception as e:  # noqa: BLE001 - any bad call is the model's, reported back to it
        return f"error: {type(e).__name__}: {e}"


def _eval(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("only numbers and + - * / ( )")
