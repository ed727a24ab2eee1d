"""The `mcp` env against a real MCP server of ours (`tests/envs/mcp_server.py`, the mcp SDK's
MCPServer over stdio): its tool list is the env's schemas and calls go through the protocol (compared
with the SDK's own client); servers start per run or per episode and stop, none outlives a killed
trainer; check-env through the rollout loop and token contract."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentic_rl.envs.adapters.mcp import close_servers
from agentic_rl.envs.formats import call_action
from agentic_rl.envs.registry import resolve_env
from agentic_rl.rollout.conformance import check_env

SERVER = Path(__file__).with_name("mcp_server.py")
PAIRS = [(3, 4), (5, 6), (7, 8), (9, 2), (12, 3), (11, 11), (6, 7), (8, 9), (13, 2), (4, 4)]


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    rows = [{"question": f"What is {a} times {b}?", "answer": str(a * b), "demonstration": [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "multiply", "arguments": {"a": a, "b": b}}}]},
        {"role": "assistant", "content": f"<answer>{a * b}</answer>"}]} for a, b in PAIRS]
    path = tmp_path_factory.mktemp("mcp") / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    yield {"server": f"python {SERVER}", "train": str(path), "heldout_frac": 0.2, "verifier": "numeric"}
    close_servers()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited


def _gone(pid: int, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    return not _alive(pid)


def _step(env, name: str, **arguments):
    return env.step(call_action(env.format, name, **arguments))


def _sdk_view() -> tuple[list[dict], str]:
    """The server's tools and a call's text, through the mcp SDK's own client (the independent read)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def run():
        async with stdio_client(StdioServerParameters(command=sys.executable, args=[str(SERVER)])) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                result = await session.call_tool("multiply", {"a": 6, "b": 7})
                return [{"name": t.name, "parameters": t.input_schema} for t in tools], result.content[0].text
    return asyncio.run(run())


def test_tools_are_the_servers_and_calls_go_through_the_protocol(options):
    spec = resolve_env("mcp", options)
    env = spec.make_env(options)
    env.reset(spec.tasks("train", 1, 0)[0])
    tools, text = _sdk_view()
    assert [{"name": s["function"]["name"], "parameters": s["function"]["parameters"]} for s in env.tool_schemas] == tools
    assert _step(env, "multiply", a=6, b=7).observation[0]["content"] == text == "42"
    raised = _step(env, "fail", reason="no luck")
    assert raised.tool_errors == 1 and "no luck" in raised.observation[0]["content"]  # isError: an error observation
    bad = _step(env, "multiply", a="six")
    assert bad.tool_errors == 1 and "multiply" in bad.observation[0]["content"]
    assert _step(env, "nothing").observation[0]["content"].startswith("Error: unknown tool 'nothing'")
    slow = dict(options, tool_timeout_s=0.3)
    env = resolve_env("mcp", slow).make_env(slow)
    env.reset(spec.tasks("train", 1, 0)[0])
    assert "timed out" in _step(env, "hang", seconds=2).observation[0]["content"]
    env.close()


def test_a_run_shares_one_server_and_an_episode_gets_its_own(options):
    spec = resolve_env("mcp", options)
    task = spec.tasks("train", 1, 0)[0]
    shared = [spec.make_env(options) for _ in range(2)]
    for env in shared:
        env.reset(task)
    pids = {_step(env, "pid").observation[0]["content"] for env in shared}
    counts = [_step(env, "note", text="x").observation[0]["content"] for env in shared]
    assert len(pids) == 1 and counts[1] == f"{int(counts[0].split()[0]) + 1} notes"  # one server, its state shared
    for env in shared:
        env.close()
    assert _alive(int(pids.pop()))  # a run's server outlives its episodes ...
    own = dict(options, lifetime="episode")
    fresh = [resolve_env("mcp", own).make_env(own) for _ in range(2)]
    for env in fresh:
        env.reset(task)
    mine = [int(_step(env, "pid").observation[0]["content"]) for env in fresh]
    assert mine[0] != mine[1] and [_step(env, "note", text="x").observation[0]["content"] for env in fresh] == ["1 notes"] * 2
    for env in fresh:
        env.close()
    assert all(_gone(pid) for pid in mine)  # ... an episode's stops with it


def test_a_dead_server_is_restarted_and_none_outlives_a_killed_trainer(options, tmp_path):
    spec = resolve_env("mcp", options)
    env = spec.make_env(options)
    env.reset(spec.tasks("train", 1, 0)[0])
    first = int(_step(env, "pid").observation[0]["content"])
    os.kill(first, signal.SIGKILL)
    assert _gone(first)
    second = _step(env, "pid")  # the machine's failure: the call is tried once more, on a new server
    assert second.tool_errors == 0 and int(second.observation[0]["content"]) != first
    env.close()
    script = tmp_path / "trainer.py"
    script.write_text(
        "import json, sys\nfrom agentic_rl.envs.registry import resolve_env\nfrom agentic_rl.envs.formats import call_action\n"
        f"options = json.loads({json.dumps(json.dumps(options))})\n"
        "spec = resolve_env('mcp', options); env = spec.make_env(options); env.reset(spec.tasks('train', 1, 0)[0])\n"
        "print(env.step(call_action(env.format, 'pid')).observation[0]['content'], flush=True)\n"
        "import time; time.sleep(60)\n")
    trainer = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        server = int(trainer.stdout.readline())
        assert _alive(server)
        trainer.kill()  # SIGKILL: no atexit, no close; the server reads end-of-file and exits
        trainer.wait(10)
        assert _gone(server)
    finally:
        trainer.kill()
        trainer.stdout.close()


def test_check_env_passes(options, tokenizer):
    checks = check_env("mcp", tokenizer, options)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
