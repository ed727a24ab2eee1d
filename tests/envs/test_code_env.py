"""The code env: its tools in the sandbox, the ladder reward on hand-made right and wrong functions,
hostile code that loops, forks or eats memory, and check-env through the real rollout loop."""

from __future__ import annotations

import time

import pytest

from agentic_rl.data import code_tasks
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.code_tiers import mutants
from agentic_rl.rollout.conformance import check_env
from agentic_rl.types import Trajectory, Turn

SPEC = get_env("code")


def _score(reward, task, text: str):
    return reward(task, Trajectory(task=task, turns=(Turn((), (1,), (0.0,), text, "eos"),), terminated=True))


def test_run_tests_says_which_examples_pass_and_run_python_runs_in_the_sandbox():
    task = code_tasks.make_task("rotate", 3, "train")
    env = SPEC.make_env({})
    env.reset(task)
    right = env.run_tests(task.meta["prompt"] + task.answer)
    assert right.count("PASS") == 3 and "FAIL" not in right
    wrong = env.run_tests(f"def {task.meta['entry_point']}(items):\n    return items\n")
    assert "FAIL" in wrong
    assert env.run_python("import os\nprint(os.getcwd(), len(os.listdir('/')))").strip()


def test_the_ladder_reward_on_right_and_wrong_functions():
    task = code_tasks.make_task("rotate", 4, "train")  # a body of several lines: a syntax slip is one
    reward = SPEC.make_reward({})
    full = task.meta["prompt"] + task.answer
    right = _score(reward, task, f"```python\n{full}```")
    assert (right.value, right.details["correct"], right.details["outcome/tier_reached"]) == (1.0, 1.0, 3.0)
    wrong = [(kind, body) for kind, body in mutants(task.answer) if body != task.answer]
    assert "syntax" in dict(wrong) and len(wrong) >= 3
    for kind, body in wrong:
        s = _score(reward, task, f"```python\n{task.meta['prompt'] + body}```")
        assert s.details["correct"] == 0.0, kind
        if kind == "syntax":  # stopped by the first tier: the dear ones never ran
            assert s.details["outcome/tier_reached"] == 1.0
        assert s.value == pytest.approx(0.1)  # the gated format term: a code block, no failed call
    assert _score(reward, task, "no code at all").value == 0.0


def test_hostile_code_ends_as_observations(tokenizer):
    task = code_tasks.make_task("digit_sum", 1, "train")
    env = SPEC.make_env({})
    for action in SPEC.hostile_actions(task, env):
        env.reset(task)
        start = time.perf_counter()
        result = env.step(action)
        assert time.perf_counter() - start < 30 and result.observation, action[:60]
        assert "Error" in result.observation[0]["content"] or "FAIL" in result.observation[0]["content"]


def test_check_env_passes(tokenizer):
    checks = check_env("code", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
