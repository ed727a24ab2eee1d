"""The server's requests in flight (`engines/server.py`): a request waiting for its sample holds no
thread, so any number wait at once. Before, each waited on a thread of anyio's pool, whose limiter
lends 40: the 41st and later queued for a thread, and so did every other handler that runs in one
(`/weights/checksum`, `load_weights`, `prompt_logprobs`)."""

from __future__ import annotations

import asyncio
import sys
import time

import httpx

from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.engines.server import create_app
from tests.engines.test_served import Server

CONCURRENT = 64  # past anyio's default of 40 threads


def _threads_waiting_on_a_future() -> int:
    """Threads whose stack is in `concurrent.futures.Future.result` (a handler's thread, waiting)."""
    count = 0
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "result" and frame.f_code.co_filename.endswith("concurrent/futures/_base.py"):
                count += 1
                break
            frame = frame.f_back
    return count


class Held(ScriptedEngine):
    """A scripted engine whose first batch waits until every request is in the server (decoding, or
    queued for the next batch), and notes how many threads wait on a future meanwhile."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer, lambda row, turn: "ok")
        self.worker, self.in_flight, self.threads = None, 0, None

    def session(self, seed: int = 0, row_seeds=None):
        session, held = super().session(seed, row_seeds), self

        class First:
            def run(self, prompts, params, on_stop, *args, **kw):
                until = time.monotonic() + 30
                while held.threads is None and time.monotonic() < until:
                    held.in_flight = len(prompts) + held.worker.queue.qsize()
                    if held.in_flight >= CONCURRENT:
                        time.sleep(0.5)  # the handlers settle where they wait
                        held.threads = _threads_waiting_on_a_future()
                    time.sleep(0.01)
                session.run(prompts, params, on_stop, *args, **kw)
        return First()


def test_64_requests_are_all_in_flight_at_once_and_hold_no_thread(tokenizer):
    engine = Held(tokenizer)
    app = create_app(engine, tokenizer)
    engine.worker = app.state.worker
    server = Server(app)

    async def ask() -> list[int]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            replies = await asyncio.gather(*(client.post("/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 4})
                                             for _ in range(CONCURRENT)))
        return [r.status_code for r in replies]

    try:
        statuses = asyncio.run(ask())
    finally:
        server.stop()
    assert statuses == [200] * CONCURRENT and engine.in_flight == CONCURRENT
    assert engine.threads == 0  # before: 40, anyio's threads, each a request waiting
