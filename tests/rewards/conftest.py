from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agentic_rl.types import Task, Trajectory, Turn


@pytest.fixture
def episode():
    """A one- or multi-turn trajectory from action texts (observations between them)."""
    def make(*actions: str, observations: tuple[str, ...] = (), answer="12", meta=None, errors: int = 0,
             tool_calls=()) -> Trajectory:
        turns = []
        for i, text in enumerate(actions):
            obs = observations[i] if i < len(observations) else ""
            calls = tool_calls[i] if i < len(tool_calls) else ()
            turns.append(Turn((1,), (2,), (-0.5,), text, "eos" if i == len(actions) - 1 else "stop", observation=obs,
                              tool_calls=calls, tool_errors=errors if i == 0 else 0))
        return Trajectory(Task("t", "q", answer, meta or {}), tuple(turns), terminated=True)
    return make


class _Server:
    """A minimal OpenAI-compatible endpoint: replies with `reply`, records the requests."""

    def __init__(self, reply: str):
        outer = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def judge_server():
    """Starts `_Server(reply)`s on loopback for the test, and stops them after it."""
    servers = []

    def start(reply: str) -> _Server:
        servers.append(_Server(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
