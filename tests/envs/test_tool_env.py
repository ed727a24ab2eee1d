"""ToolEnv turns every kind of bad call into an error observation the model can read."""

from __future__ import annotations

import time

from agentic_rl.envs.base import ToolEnv
from agentic_rl.tools import calculator
from agentic_rl.types import Task


def boom(x: int) -> str:
    """Always fails.

    Args:
        x: anything
    """
    raise RuntimeError("kaboom")


def sleepy(seconds: float) -> str:
    """Sleeps.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "awake"


def _env():
    env = ToolEnv([calculator, boom, sleepy], "sys", timeout_s=0.2)
    env.reset(Task("t", "q", 1))
    return env


def _call(name, args):
    import json

    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def test_good_call_and_final_answer():
    env = _env()
    r = env.step(_call("calculator", {"expression": "6 * 7"}))
    assert not r.terminated and r.observation[0]["content"] == "42" and r.tool_errors == 0
    assert env.step("<answer>42</answer>").terminated


def test_bad_calls_become_error_observations():
    env = _env()
    cases = {
        "bad json": '<tool_call>{"name": "calculator", "arguments": {"expression": 6 * 7}}</tool_call>',
        "unknown tool": _call("abacus", {"expression": "1"}),
        "wrong argument": _call("calculator", {"expr": "1"}),
        "missing argument": _call("calculator", {}),
        "raises": _call("boom", {"x": 1}),
        "hangs": _call("sleepy", {"seconds": 5}),
        "bad expression": _call("calculator", {"expression": "__import__('os')"}),
    }
    for label, action in cases.items():
        start = time.perf_counter()
        r = env.step(action)
        assert not r.terminated and not r.truncated, label
        assert r.tool_errors == 1, label
        assert r.observation[0]["content"].startswith("Error"), label
        assert time.perf_counter() - start < 2.0, label  # the hanging tool is abandoned at its timeout
