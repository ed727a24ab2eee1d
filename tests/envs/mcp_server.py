"""A small MCP server for the tests (stdio transport, the mcp SDK's MCPServer): arithmetic, a
notebook that keeps state for the server's life, its own process id, a tool that raises and one
that hangs. Run: `python tests/envs/mcp_server.py`."""

from __future__ import annotations

import os
import time

from mcp.server import MCPServer

server = MCPServer("agentic-rl-test")
NOTES: list[str] = []


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@server.tool()
def note(text: str) -> str:
    """Write a note; returns how many notes the server holds."""
    NOTES.append(text)
    return f"{len(NOTES)} notes"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    """Always raises."""
    raise ValueError(reason)


@server.tool()
def hang(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "woke"


if __name__ == "__main__":
    server.run("stdio")
