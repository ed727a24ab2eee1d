"""`token_staleness` (partial rollouts): staleness counted per trained token, by its turn's version."""

from __future__ import annotations

import pytest

from agentic_rl.trainer.rl_step import token_staleness
from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn


def _turn(version: int, tokens: int, trained: bool = True) -> Turn:
    return Turn(obs_ids=(1,), action_ids=(7,) * tokens, logprobs=(-0.5,) * tokens, action_text="x", stop_reason="eos",
                trained=trained, version=version)


def test_staleness_is_counted_per_trained_token():
    """At version 6: episode A has 2 tokens of version 3 (3 stale) and 3 of version 5 (1 stale);
    C has an untrained turn of version 1 (not counted) and 1 token of version 4 (2 stale); B failed
    on the machine's side (trains nothing, not counted). Max 3; mean (2*3 + 3*1 + 1*2) / 6 = 11/6."""
    task = Task("t", "p")
    a = Trajectory(task, (_turn(3, 2), _turn(5, 3)))
    b = Trajectory(task, (_turn(0, 4),), infra_failure="env_step")
    c = Trajectory(task, (_turn(1, 5, trained=False), _turn(4, 1)))
    groups = [TrajectoryGroup(task, (a, b)), TrajectoryGroup(task, (c,))]
    assert token_staleness(7, groups, 6, bound=3) == {"staleness": 3, "staleness_mean": pytest.approx(11 / 6)}
    with pytest.raises(RuntimeError, match="a token sampled by version 3 .* 3 versions stale"):  # past the bound: stops
        token_staleness(7, groups, 6, bound=2)
    with pytest.raises(RuntimeError, match="-1 versions stale"):  # a token of a version not made yet
        token_staleness(7, [TrajectoryGroup(task, (Trajectory(task, (_turn(7, 1),)),))], 6, bound=3)
