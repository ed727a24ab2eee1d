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


def test_an_async_env_steps_through_the_rollout(tokenizer):
    """An env written with asyncio (`astep`) runs in the real rollout loop; its awaits happen on the
    shared background loop, and a raising astep truncates only its own episode."""
    import asyncio

    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.scripted import ScriptedEngine
    from agentic_rl.envs.base import StepResult
    from agentic_rl.envs.formats import HERMES
    from agentic_rl.rollout.loop import Budget, rollout
    from agentic_rl.types import Task

    class AsyncEcho:
        format, tool_schemas = HERMES, []

        def reset(self, task):
            self.task = task
            return [{"role": "user", "content": task.prompt}]

        async def astep(self, action):
            await asyncio.sleep(0.01)  # the I/O a real env would await
            if self.task.id == "boom":
                raise RuntimeError("backend down")
            if "<tool_call>" in action:
                return StepResult(observation=({"role": "tool", "content": "pong"},))
            return StepResult(terminated=True)

    call = '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'
    engine = ScriptedEngine(tokenizer, lambda row, turn: call if turn == 0 else "done" + tokenizer.eos_token)
    groups, _ = rollout(engine, AsyncEcho, [Task("ok", "ping?"), Task("boom", "ping?")], 1,
                        SamplingParams(1.0, 1.0, 64, ("</tool_call>",)), Budget(4, 64, 256))
    ok, boom = groups[0].trajectories[0], groups[1].trajectories[0]
    assert ok.terminated and [t.observation for t in ok.turns] == ["pong", ""]
    assert boom.truncated and "backend down" in boom.error
