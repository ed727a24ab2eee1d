"""verifiers (v0.4, `verifiers.v1`) environments built in memory for the adapter's tests: a
single-turn taskset scored by three weighted rewards and a metric, a taskset whose task has a
toolset of Python tools, and an `Env` whose own `run` answers each guess (higher / lower)."""

from __future__ import annotations

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def digits_only(self, trace) -> float:
        return float(trace.last_reply.isdigit())

    @vf.reward(weight=-0.25)
    async def long_reply(self, trace) -> float:
        return min(len(trace.last_reply) / 40, 1.0)

    @vf.metric
    async def turns(self, trace) -> float:
        return float(trace.num_turns)


class SumTaskset(vf.Taskset[SumTask]):
    def load(self):
        for i in range(16):
            a, b = 3 * i + 1, 7 * i + 2
            yield SumTask(SumData(prompt=f"What is {a} + {b}? Reply with the number.",
                                  system_prompt="You add numbers.", answer=str(a + b)))


def single_turn() -> vf.Taskset:
    return SumTaskset(vf.TasksetConfig(id="sum"))


class Calculator(vf.Toolset):
    @vf.tool
    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor.
            b: the second factor.
        """
        return a * b

    @vf.tool
    async def square(self, x: int) -> int:
        """Square an integer.

        Args:
            x: the number.
        """
        return x * x


class ProductTask(vf.Task[SumData]):
    @classmethod
    def toolsets(cls, config):
        return [Calculator(vf.ToolsetConfig())]

    @vf.reward(weight=1.0)
    async def correct(self, task, trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.2)
    async def used_tool(self, trace) -> float:
        return float(len(trace.tool_messages) > 0)


class ProductTaskset(vf.Taskset[ProductTask]):
    def load(self):
        for i in range(16):
            a, b = 13 + i, 17 + 2 * i
            yield ProductTask(SumData(prompt=f"What is {a} * {b}? Use the multiply tool.",
                                      system_prompt="You multiply with a tool.", answer=str(a * b)))


def tools() -> vf.Taskset:
    return ProductTaskset(vf.TasksetConfig(id="product"))


class GuessData(vf.TaskData):
    secret: int


class GuessTask(vf.Task[GuessData]):
    @vf.reward(weight=1.0)
    async def found(self, task, trace) -> float:
        return float(trace.last_reply == str(task.secret))

    @vf.reward(weight=0.1)
    async def quick(self, trace) -> float:
        return 1.0 / trace.num_turns if trace.num_turns else 0.0


class GuessTaskset(vf.Taskset[GuessTask]):
    def load(self):
        for i in range(16):
            yield GuessTask(GuessData(prompt=f"Game {i}: guess my number from 1 to 20. Reply with one number.",
                                      system_prompt="You play a guessing game.", secret=(7 * i) % 20 + 1))


class GuessConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})


class GuessEnv(vf.Env[GuessConfig]):
    """The env's own multi-turn logic: each guess is answered higher or lower, five guesses at most."""

    async def run(self, task, agents):
        async with agents.player.interaction(task) as player:
            segment = await player.turn()
            for _ in range(4):
                if segment.terminated or segment.last_reply == str(task.data.secret):
                    return
                guess = int(segment.last_reply) if segment.last_reply.isdigit() else 0
                segment = await player.turn("higher" if guess < task.data.secret else "lower")



class RaisingEnv(vf.Env[GuessConfig]):
    """An env whose `run` fails after the first guess."""

    async def run(self, task, agents):
        async with agents.player.interaction(task) as player:
            await player.turn()
            raise ValueError("the board is on fire")
