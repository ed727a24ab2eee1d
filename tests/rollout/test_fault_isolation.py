"""Fault isolation: an env or reward that raises, hangs or returns garbage costs its own episode,
recorded with the error, and never the batch."""

from __future__ import annotations

import math
import time

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.base import StepResult
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.base import Score
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.types import TrajectoryGroup

MODES = ["ok", "raise", "hang", "none", "bad_obs", "nan_reward", "ok"]


class Faulty:
    """The calculator env, except that `step` misbehaves in the way `mode` names."""

    def __init__(self, mode: str):
        self.inner = get_env("calculator").make_env({})
        self.format, self.tool_schemas, self.mode = self.inner.format, self.inner.tool_schemas, mode

    def reset(self, task):
        return self.inner.reset(task)

    def step(self, action):
        if self.mode == "raise":
            raise RuntimeError("boom")
        if self.mode == "hang":
            time.sleep(30)
        if self.mode == "none":
            return None
        if self.mode == "bad_obs":
            return StepResult(observation=({"role": "tool", "content": 42},))
        if self.mode == "nan_reward":
            return StepResult(reward=math.nan, terminated=True)
        return self.inner.step(action)


def _episodes(tokenizer, timeout_s: float):
    spec = get_env("calculator")
    tasks = spec.tasks("train", len(MODES), 0)
    modes = iter(MODES)
    engine = ScriptedEngine(tokenizer, lambda row, turn: f"<answer>{tasks[row].answer}</answer>{tokenizer.eos_token}")
    params = SamplingParams(0.0, 1.0, 32, spec.make_env({}).format.stop_strings)
    start = time.perf_counter()
    groups, _ = rollout(engine, lambda: Faulty(next(modes)), tasks, 1, params,
                        Budget(3, 32, 96, step_timeout_s=timeout_s))
    return [g.trajectories[0] for g in groups], time.perf_counter() - start, spec


def test_a_misbehaving_env_costs_only_its_episode(tokenizer):
    trajs, seconds, _ = _episodes(tokenizer, timeout_s=0.5)
    by_mode = dict(zip(MODES[1:-1], trajs[1:-1]))
    for t in (trajs[0], trajs[-1]):  # the well-behaved episodes around the broken ones finish normally
        assert t.terminated and t.error is None
    for mode, t in by_mode.items():
        assert t.truncated and not t.terminated and t.error, mode
        assert t.infra_failure == "env_step" and sum(t.loss_mask()) == 0, mode  # the env's fault: not trained
    assert trajs[0].infra_failure is None and trajs[-1].infra_failure is None
    assert "boom" in by_mode["raise"].error
    assert "exceeded 0.5s" in by_mode["hang"].error
    assert "StepResult" in by_mode["none"].error
    assert "string content" in by_mode["bad_obs"].error
    assert "finite" in by_mode["nan_reward"].error
    assert seconds < 10  # the hung step was abandoned at its deadline, not waited out


class _Reward:
    """Scores by the task's position; misbehaves like `mode` for the episodes it is told to."""

    def __init__(self, modes):
        self.modes = modes

    def __call__(self, task, trajectory):
        mode = self.modes[task.id]
        if mode == "raise":
            raise ValueError("verifier crashed")
        if mode == "hang":
            time.sleep(30)
        if mode == "nan":
            return Score(math.nan)
        if mode == "garbage":
            return "1.0"
        return Score(1.0)


@pytest.mark.parametrize("mode,message", [("raise", "verifier crashed"), ("hang", "exceeded"),
                                          ("nan", "finite"), ("garbage", "expected a Score")])
def test_a_misbehaving_reward_costs_only_its_episode(tokenizer, mode, message):
    trajs, _, _ = _episodes(tokenizer, timeout_s=0.5)
    ok_a, ok_b = trajs[0], trajs[-1]
    groups = [TrajectoryGroup(t.task, (t,)) for t in (ok_a, ok_b)]
    modes = {ok_a.task.id: mode, ok_b.task.id: "ok"}
    start = time.perf_counter()
    out = score_groups(_Reward(modes), groups, timeout_s=0.5)
    assert time.perf_counter() - start < 10
    bad, good = out[0].trajectories[0], out[1].trajectories[0]
    assert bad.reward == 0.0 and message in bad.error and bad.infra_failure == "reward"
    assert good.reward == 1.0 and good.error is None and good.infra_failure is None
