"""A rollout's statistics: the time its episodes spent in their envs (a sandbox's seconds for the
repository-repair env), beside the wall time, episodes and generated tokens."""

from __future__ import annotations

import time

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.loop import Budget, RolloutStats, rollout

RESET_S, STEP_S = 0.05, 0.1


class Slow:
    """The calculator env, with a reset and a step that take a known time."""

    def __init__(self):
        self.inner = get_env("calculator").make_env({})
        self.format, self.tool_schemas = self.inner.format, self.inner.tool_schemas

    def reset(self, task):
        time.sleep(RESET_S)
        return self.inner.reset(task)

    def step(self, action):
        time.sleep(STEP_S)
        return self.inner.step(action)


def test_env_seconds_are_the_time_the_episodes_spent_in_their_envs(tokenizer):
    """Three one-turn episodes: each resets once and steps once, so the envs held at least
    3 x (RESET_S + STEP_S) = 0.45 s (sleep never returns early); the scripted engine's decoding adds
    nothing to it, and the envs' time is inside the rollout's wall time."""
    spec = get_env("calculator")
    tasks = spec.tasks("train", 3, 0)
    engine = ScriptedEngine(tokenizer, lambda row, turn: f"<answer>{tasks[row].answer}</answer>{tokenizer.eos_token}")
    params = SamplingParams(0.0, 1.0, 32, spec.make_env({}).format.stop_strings)
    groups, stats = rollout(engine, Slow, tasks, 1, params, Budget(3, 32, 96))
    assert all(g.trajectories[0].terminated for g in groups)
    assert 3 * (RESET_S + STEP_S) <= stats.env_seconds <= stats.seconds
    assert stats.episodes == 3


def test_stats_of_parts_add_up_over_the_wall_time_given():
    parts = [RolloutStats(2.0, 4, 100, 1.5), RolloutStats(3.0, 2, 50, 0.5)]
    assert RolloutStats.total(parts, 3.0) == RolloutStats(3.0, 6, 150, 2.0)
