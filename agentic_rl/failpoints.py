"""Failpoints: named places where a test can make the process die, to prove crash safety.

`AGENTIC_RL_FAILPOINT=state.mid_write:2` kills the process with SIGKILL the second time execution
reaches `failpoint("state.mid_write")`. Unset (always, outside tests), a failpoint is one dict lookup.
"""

from __future__ import annotations

import os
import signal

_hits: dict[str, int] = {}


def failpoint(name: str) -> None:
    spec = os.environ.get("AGENTIC_RL_FAILPOINT")
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
