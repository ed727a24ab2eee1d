"""`long_tail`: the calculator's tasks, tools and reward, with episodes of a scripted length.

A task's episode takes `turns_of(task)` turns whatever the policy writes (1 turn for half the tasks,
2 for a quarter, ... up to `LONGEST`: a geometric long tail, fixed by the task's id), so a tiny
random model produces the length mix partial rollouts are for (tests/rollout/test_partial.py,
benchmarks/bench_partial_rollouts.py). Before its last turn an action the calculator would end on
is answered with an observation, and the episode goes on."""

from __future__ import annotations

import dataclasses
import zlib

from agentic_rl.envs.base import StepResult
from agentic_rl.envs.builtin import calculator
from agentic_rl.envs.registry import ENVS, register_env

NAME, LONGEST = "long_tail", 8
GO_ON = ({"role": "tool", "name": "note", "content": "Not done yet: go on."},)


def turns_of(task) -> int:
    """1 + the trailing one bits of the id's CRC: P(n turns) = 2^-n, cut at LONGEST."""
    h, n = zlib.crc32(task.id.encode()), 1
    while h & 1 and n < LONGEST:
        h, n = h >> 1, n + 1
    return n


class LongTailEnv:
    """The calculator's env, ended after the task's scripted number of turns."""

    def __init__(self, inner):
        self.inner, self.left = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self, task):
        self.left = turns_of(task)
        return self.inner.reset(task)

    def step(self, action: str) -> StepResult:
        self.left -= 1
        if self.left <= 0:
            return StepResult(terminated=True)
        result = self.inner.step(action)
        return dataclasses.replace(result, terminated=False, observation=GO_ON) if result.terminated else result


def register() -> None:
    """`env.name: long_tail` for a recipe (once a process)."""
    if NAME not in ENVS:
        spec = calculator.SPEC
        register_env(dataclasses.replace(spec, name=NAME, make_env=lambda options: LongTailEnv(spec.make_env(options))))
