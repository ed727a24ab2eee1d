"""`faults.deadline`: the outer time limit on env and reward code, on the main thread (SIGALRM)
and on any other (the rollout producer's: an asynchronous exception)."""

from __future__ import annotations

import threading
import time

import pytest

from agentic_rl.faults import Timeout, deadline


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # pure Python: what an env's runaway loop looks like
        pass


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    return out


def test_a_runaway_loop_is_stopped_on_the_main_thread():
    t0 = time.monotonic()
    with pytest.raises(Timeout, match="step exceeded 0.2s"), deadline(0.2, "step"):
        _spin(5)
    assert time.monotonic() - t0 < 1


def test_a_runaway_loop_is_stopped_on_another_thread():
    def guarded():
        t0 = time.monotonic()
        with deadline(0.2, "step"):
            _spin(5)
        return time.monotonic() - t0
    out = _in_thread(guarded)
    assert isinstance(out.get("error"), Timeout) and "step exceeded 0.2s" in str(out["error"])


def test_a_block_that_ends_in_time_is_not_interrupted_later():
    def guarded():
        with deadline(0.2, "step"):
            _spin(0.05)
        _spin(0.4)  # past the deadline, outside the block: nothing may fire here
        return "done"
    assert _in_thread(guarded) == {"value": "done"}
