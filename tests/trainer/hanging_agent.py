"""An agent that hangs in the first episode (`g0`) of each of the first four tasks of a rollout, each
at a place of its own: task 0 before its first model call, task 1 between its two calls, task 2
after its last (as an agent stuck in its own tools or reward would), each in a blocking wait no
timer can interrupt, until a test sets `RELEASE`; task 3 between its calls in a Python loop, which a
timer can stop. It swallows whatever stops it, as agents with a broad `except` do, and calls the
model once more, keeping that late call's status in `LATE` (by task). Every other episode makes two
calls and posts the parity reward of `scored_agent.py`."""

from __future__ import annotations

import re
import threading
import time

from openai import APIStatusError, OpenAI

from tests.trainer.scored_agent import post_parity_reward

RELEASE = threading.Event()
LATE: dict[int, int] = {}
PLACES = [("before", False), ("between", False), ("after", False), ("between", True)]  # (where, in a Python loop)


def run(task: dict, base_url: str) -> None:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    i, g = map(int, re.search(r"-t(\d+)-g(\d+)/v1$", base_url).groups())
    place, spin = PLACES[i] if g == 0 and i < len(PLACES) else (None, False)
    messages = [{"role": "user", "content": task["prompt"]}]
    for here in ("before", "between"):
        if place == here:
            _hang(client, i, spin)
        reply = client.chat.completions.create(model="policy", messages=messages)
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]
    if place == "after":
        _hang(client, i, spin)
    post_parity_reward(base_url)


def _hang(client: OpenAI, i: int, spin: bool) -> None:
    try:
        if spin:
            while not RELEASE.is_set():
                time.sleep(0.01)
        else:
            RELEASE.wait()
    except Exception:  # noqa: BLE001 - an agent that swallows what stops it and goes on
        pass
    try:
        client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "Still there?"}])
        LATE[i] = 200
    except APIStatusError as e:
        LATE[i] = e.status_code
