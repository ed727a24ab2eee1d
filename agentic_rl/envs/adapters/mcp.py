"""`mcp`: the tasks env (`envs/builtin/tasks.py`) whose tools are an MCP server's, over stdio
(docs/envs/mcp.md).

    env:
      name: mcp
      options:
        server: python examples/mcp/server.py   # the command that starts the server (stdio transport)
        lifetime: run                           # or episode: a fresh server per episode (stateful tools)
        train: examples/mcp/train.jsonl
        heldout: examples/mcp/test.jsonl
        verifier: numeric

The tool schemas are the server's (`tools/list`: each tool's name, description and input schema);
a call goes through the protocol (`tools/call`) and its text content is the observation, an
`isError` result an error observation. Tasks, verifier, system prompt, format and the few-shot
baseline are the tasks env's, read from the same options (`tools` excepted: the server's are the tools).

Lifetime `run`: one server per distinct command and process, started at the first episode and
stopped when the process exits (`close_servers()` stops them sooner). Lifetime `episode`: the server
starts at the episode's reset and stops at its close. The server is a child on a pipe: when the
trainer dies, the server reads end-of-file on its stdin and exits (the MCP stdio transport's rule),
so no server outlives its run.

Options: the tasks env's, and `server` (required: a command line, or a list; a leading `python` is
this interpreter), `lifetime` (run), `cwd` (the server's working directory), `server_env` (its
environment variables beside PATH, HOME and PYTHONPATH), `start_timeout_s` (30).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import os
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agentic_rl.envs.builtin import tasks as tasks_env
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserError
from agentic_rl.faults import InfrastructureError
from agentic_rl.types import Task, ToolCall

OPTIONS = (*[o for o in tasks_env.OPTIONS if o != "tools"], "server", "lifetime", "cwd", "server_env", "start_timeout_s")
LIFETIMES = ("run", "episode")


class MCPServerDown(InfrastructureError):
    """The MCP server exited or stopped answering: the machine's failure, not the policy's call."""

    kind = "tool_backend"


class MCPConnection:
    """One MCP server process over stdio and its client session, served by an event loop on a thread
    of its own (the session's streams must open and close in one task)."""

    def __init__(self, command: Sequence[str], cwd: str | None = None, env: Mapping[str, str] | None = None,
                 start_timeout_s: float = 30.0):
        self.command = tuple(command)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentic-rl-mcp", daemon=True)
        self._thread.start()
        self._session = None
        self._broken = False  # a call found the connection gone
        self._stopped: asyncio.Event | None = None
        self._served: asyncio.Future | None = None
        try:
            self.tools = asyncio.run_coroutine_threadsafe(self._open(cwd, dict(env or {})), self._loop).result(start_timeout_s)
        except BaseException as e:
            self.close()
            raise MCPServerDown(f"MCP server {shlex.join(self.command)!r} did not start: {type(e).__name__}: {e}") from e

    async def _open(self, cwd: str | None, env: dict[str, str]) -> list:
        ready = asyncio.get_running_loop().create_future()
        self._stopped = asyncio.Event()
        self._served = asyncio.ensure_future(self._serve(ready, cwd, env))
        return await ready

    async def _serve(self, ready: asyncio.Future, cwd: str | None, env: dict[str, str]) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=self.command[0], args=list(self.command[1:]), env=env, cwd=cwd)
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready.set_result(await _all_tools(session))
                self._session = session
                await self._stopped.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
        finally:
            self._session = None

    @property
    def alive(self) -> bool:
        return (not self._broken and self._session is not None and self._served is not None
                and not self._served.done())

    def call(self, name: str, arguments: Mapping[str, Any], timeout_s: float):
        """The server's `CallToolResult`; TimeoutError past `timeout_s`, MCPServerDown if it is gone."""
        if not self.alive:
            raise MCPServerDown(f"MCP server {shlex.join(self.command)!r} is not running")
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, dict(arguments)), self._loop)
        try:
            return future.result(timeout=timeout_s or None)
        except TimeoutError:
            future.cancel()
            raise
        except Exception as e:
            from mcp.shared.exceptions import MCPError

            if not self.alive or isinstance(e, MCPError):  # a protocol-level error: the connection, not the call
                self._broken = True
                raise MCPServerDown(f"MCP server {shlex.join(self.command)!r} failed: {type(e).__name__}: {e}") from e
            raise

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the server (the transport closes its stdin, then terminates it) and the loop. Idempotent."""
        if self._loop.is_closed():
            return
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._served is not None:
            served = self._served
            try:
                asyncio.run_coroutine_threadsafe(asyncio.wait([served], timeout=timeout_s), self._loop).result(timeout_s + 1)
            except Exception:  # noqa: BLE001 - closing: the loop is stopped below whatever happened
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._loop.close()


async def _all_tools(session) -> list:
    """Every tool of the server, page by page."""
    tools, cursor = [], None
    while True:
        page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
        tools += page.tools
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return tools


def tool_schema(tool) -> dict[str, Any]:
    """An MCP tool as the OpenAI-style schema our formats render."""
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": dict(tool.input_schema or {"type": "object", "properties": {}})}}


def result_text(result) -> str:
    """A call's content as text: its text parts, a note for other kinds (images, resources)."""
    parts = [c.text if getattr(c, "type", "") == "text" else f"[{getattr(c, 'type', 'content')} content]"
             for c in result.content]
    if not parts and getattr(result, "structured_content", None) is not None:
        parts = [json.dumps(result.structured_content)]
    return "\n".join(parts)


_SHARED: dict[tuple, MCPConnection] = {}
_SHARED_LOCK = threading.Lock()


def shared_connection(command: tuple[str, ...], cwd: str | None, env: Mapping[str, str], start_timeout_s: float) -> MCPConnection:
    """The run's server for this command (started on first use, again if it died)."""
    key = (command, cwd, tuple(sorted(env.items())))
    with _SHARED_LOCK:
        conn = _SHARED.get(key)
        if conn is None or not conn.alive:
            if conn is not None:
                conn.close()
            if not _SHARED:
                atexit.register(close_servers)
            conn = _SHARED[key] = MCPConnection(command, cwd, env, start_timeout_s)
        return conn


def close_servers() -> None:
    """Stop every run-lifetime server of this process."""
    with _SHARED_LOCK:
        conns = list(_SHARED.values())
        _SHARED.clear()
    for conn in conns:
        conn.close()


def server_command(server: str | Sequence[str]) -> tuple[str, ...]:
    """The server's argv; a leading `python` is this interpreter (the recipe's venv, not PATH's)."""
    argv = shlex.split(server) if isinstance(server, str) else [str(a) for a in server]
    if not argv:
        raise UserError("env.options.server: the command that starts the MCP server (e.g. 'python my_server.py')")
    return (sys.executable, *argv[1:]) if argv[0] in ("python", "python3") else tuple(argv)


class MCPEnv(tasks_env.TaskFileEnv):
    """A task-file env whose tools are an MCP server's (listed at reset, called through the protocol)."""

    def __init__(self, options: Mapping[str, Any]):
        if "server" not in options:
            raise UserError("env.options.server: the command that starts the MCP server (e.g. 'python my_server.py')")
        super().__init__({k: v for k, v in options.items() if k != "tools"})
        self.lifetime = str(options.get("lifetime", "run"))
        if self.lifetime not in LIFETIMES:
            raise UserError(f"env.options.lifetime: {self.lifetime!r}; one of {', '.join(LIFETIMES)}")
        self.command = server_command(options["server"])
        self.cwd = str(options["cwd"]) if options.get("cwd") else None
        self.server_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), **dict(options.get("server_env", {}))}
        self.start_timeout_s = float(options.get("start_timeout_s", 30.0))
        self.connection: MCPConnection | None = None

    def reset(self, task: Task) -> list[dict]:
        self._release()
        self.connect()
        return super().reset(task)

    def connect(self) -> None:
        """The server (this episode's, or the run's) and its tools, if not connected yet."""
        if self.connection is not None:
            return
        if self.lifetime == "episode":
            self.connection = MCPConnection(self.command, self.cwd, self.server_env, self.start_timeout_s)
        else:
            self.connection = shared_connection(self.command, self.cwd, self.server_env, self.start_timeout_s)
        self.tool_schemas = [tool_schema(t) for t in self.connection.tools]
        self.tools = {t.name: functools.partial(self.invoke, t.name) for t in self.connection.tools}

    def tool(self, name: str):
        self.connect()
        return self.tools[name]

    def invoke(self, name: str, **arguments: Any) -> str:
        """A call through the protocol, as text (demonstrations replay their calls with it)."""
        return result_text(self.connection.call(name, arguments, self.timeout_s))

    def _call(self, call: ToolCall) -> tuple[str, bool]:
        if call.name not in self.tools:
            return f"Error: unknown tool {call.name!r}; available: {', '.join(self.tools)}", False
        if self.lifetime == "run" and not self.connection.alive:  # died since the reset: the run's server again
            self.connection = shared_connection(self.command, self.cwd, self.server_env, self.start_timeout_s)
        try:
            result = self.connection.call(call.name, call.arguments, self.timeout_s)
        except TimeoutError:
            return f"Error: {call.name} timed out after {self.timeout_s:g}s", False
        text = result_text(result)[: self.max_result_chars]
        return (f"Error: {text}" if result.is_error and not text.startswith("Error") else text), not result.is_error

    def _release(self) -> None:
        if self.lifetime == "episode" and self.connection is not None:
            self.connection.close()
        self.connection = None

    def close(self) -> None:
        self._release()
        super().close()


@functools.lru_cache(maxsize=8)
def _bound(key: str) -> EnvSpec:
    return tasks_env.file_spec(json.loads(key), "mcp", MCPEnv, OPTIONS)


def bind(options: Mapping[str, Any]) -> EnvSpec:
    """The spec of these options' task files (read once per distinct options)."""
    return _bound(json.dumps(dict(options), sort_keys=True, default=str))


def _unbound(split: str, n: int, seed: int) -> list[Task]:
    raise UserError("env mcp: its tasks come from env.options.train (and heldout); no file is named")


SPEC = EnvSpec(name="mcp", make_env=MCPEnv, make_reward=tasks_env.make_reward, tasks=_unbound, splits=tasks_env.SPLITS,
               demonstration=tasks_env.demonstration, options=OPTIONS, bind=bind)
SPECS = (SPEC,)
