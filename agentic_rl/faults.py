"""Fault isolation helpers: a deadline for code that may hang (an env step, a reward function).

`deadline(seconds)` raises `Timeout` inside the guarded block when it runs too long. It uses the
process's interval timer (SIGALRM), which interrupts pure-Python loops, sleeps and blocking I/O;
it can only be armed on the main thread, so elsewhere (and for seconds <= 0) it guards nothing. A
tool call inside an env has its own, thread-based limit (`ToolEnv(timeout_s=...)`), and sandboxed
code its own wall-clock kill; this is the outer guard for env and reward code we did not write.
"""

from __future__ import annotations

import contextlib
import signal
import threading


class Timeout(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float, what: str = "call"):
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise Timeout(f"{what} exceeded {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
