"""A verifiers (v0.4, `verifiers.v1`) taskset written as a user of verifiers writes one, trained by
`recipes/verifiers.yaml` (`env: {name: "vf:examples/vf_arithmetic.py:taskset"}`): two-number sums,
scored by verifiers rewards with weights — the number (1.0), a reply of the number alone (0.2)."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        numbers = re.findall(r"-?\d+", trace.last_reply)
        return float(bool(numbers) and numbers[-1] == task.answer)

    @vf.reward(weight=0.2)
    async def number_only(self, trace) -> float:
        return float(trace.last_reply.strip().isdigit())


class SumTaskset(vf.Taskset[SumTask]):
    def load(self):
        pairs = [(a, b) for a in range(1, 51) for b in range(1, 51)]
        random.Random(0).shuffle(pairs)
        for a, b in pairs[:500]:  # each question once: the held-out tasks are new questions
            yield SumTask(SumData(prompt=f"What is {a} + {b}? Reply with the number only.",
                                  system_prompt="You are a careful calculator.", answer=str(a + b)))


def taskset() -> vf.Taskset:
    return SumTaskset(vf.TasksetConfig(id="arithmetic"))
