from __future__ import annotations

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
