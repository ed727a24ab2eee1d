"""Whose fault (`faults.py`): the machine's failures — a reset that raises, a reward that raises, a
sandbox that cannot start — are marked, counted, left out of their group's statistics and of the
loss; the policy's — a malformed call, its own code looping forever in the sandbox — score as the
env says and are trained on."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import ENVS, get_env, register_env
from agentic_rl.rewards.base import Score
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.tools.sandbox import SandboxUnavailable
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_advantages
from agentic_rl.types import TrajectoryGroup

SPEC = get_env("calculator")
ANSWER = "<answer>{}</answer>"


class _ResetFails:
    """The calculator env whose reset raises `fails` times, then works."""

    def __init__(self, fails: int):
        self.inner, self.fails = SPEC.make_env({}), fails
        self.format, self.tool_schemas = self.inner.format, self.inner.tool_schemas

    def reset(self, task):
        if self.fails:
            self.fails -= 1
            raise ConnectionError("task server down")
        return self.inner.reset(task)

    def step(self, action):
        return self.inner.step(action)


def _run(tokenizer, envs, script, n: int):
    tasks = SPEC.tasks("train", n, 0)
    engine = ScriptedEngine(tokenizer, lambda row, turn: script(tasks[row], turn))
    params = SamplingParams(0.0, 1.0, 48, SPEC.make_env({}).format.stop_strings)
    envs = iter(envs)
    groups, _ = rollout(engine, lambda: next(envs), tasks, 1, params, Budget(3, 48, 144, 5.0))
    return [g.trajectories[0] for g in groups]


def test_a_reset_that_raises_is_tried_again_then_is_the_machines_failure(tokenizer):
    right = lambda task, turn: ANSWER.format(task.answer) + tokenizer.eos_token  # noqa: E731
    once, always = _run(tokenizer, [_ResetFails(1), _ResetFails(2)], right, 2)
    assert once.infra_failure is None and once.error is None and once.terminated  # the second reset worked
    assert always.infra_failure == "reset" and "task server down" in always.error and not always.turns


class _Flaky:
    """A reward that raises for the tasks in `broken` (always) and for `once` (the first call only)."""

    def __init__(self, broken=(), once=()):
        self.broken, self.once = set(broken), set(once)

    def __call__(self, task, trajectory):
        if task.id in self.broken:
            raise ValueError("verifier crashed")
        if task.id in self.once:
            self.once.discard(task.id)
            raise ValueError("verifier hiccup")
        return Score(1.0, {"correct": 1.0})


def test_a_reward_that_raises_is_tried_again_then_is_the_machines_failure(tokenizer):
    right = lambda task, turn: ANSWER.format(task.answer) + tokenizer.eos_token  # noqa: E731
    a, b = _run(tokenizer, [SPEC.make_env({}), SPEC.make_env({})], right, 2)
    out = score_groups(_Flaky(broken={a.task.id}, once={b.task.id}), [TrajectoryGroup(a.task, (a,)),
                                                                     TrajectoryGroup(b.task, (b,))])
    bad, good = out[0].trajectories[0], out[1].trajectories[0]
    assert bad.infra_failure == "reward" and "verifier crashed" in bad.error and bad.reward == 0.0
    assert good.infra_failure is None and good.reward == 1.0
    assert sum(bad.loss_mask()) == 0 and sum(good.loss_mask()) > 0  # the machine's failure trains nothing


def test_a_sandbox_that_cannot_start_is_the_machines_failure(tokenizer):
    """A tool whose sandbox cannot start (tried twice) ends its episode as `sandbox_start`."""
    env = SPEC.make_env({})
    calls = []

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: the expression.
        """
        calls.append(expression)
        raise SandboxUnavailable("bwrap: setting up uid map: Permission denied")

    env.tools = {"calculator": calculator}
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n</tool_call>'
    [t] = _run(tokenizer, [env], lambda task, turn: call, 1)
    assert t.infra_failure == "sandbox_start" and "Permission denied" in t.error and len(calls) == 2


def test_a_malformed_call_is_the_policys_and_is_trained_on(tokenizer):
    bad = '<tool_call>\n{"name": "calculator", "arguments": \n</tool_call>'
    [t] = _run(tokenizer, [SPEC.make_env({})], lambda task, turn: bad if turn == 0 else "no idea" + tokenizer.eos_token, 1)
    [scored] = score_groups(SPEC.make_reward({}), [TrajectoryGroup(t.task, (t,))])
    t = scored.trajectories[0]
    assert t.turns[0].malformed_calls == 1 and t.infra_failure is None and t.reward == 0.0
    assert sum(t.loss_mask()) == len(t.turns[0].action_ids) + len(t.turns[1].action_ids)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code sandbox needs bubblewrap")
def test_the_agents_own_code_looping_forever_is_the_policys_and_is_trained_on(tokenizer):
    """ReTool: the agent's cell never ends; the sandbox stops it at its time limit and the model reads
    that as the tool's answer. The episode is the policy's: scored (0) and trained on."""
    spec = get_env("retool")
    task = spec.tasks("train", 1, 0)[0]
    loop = "<code>\nwhile True:\n    pass\n</code>"
    engine = ScriptedEngine(tokenizer, lambda row, turn: loop if turn == 0 else "<answer>0</answer>" + tokenizer.eos_token)
    env = spec.make_env({"timeout_s": 0.5})
    params = SamplingParams(0.0, 1.0, 48, env.format.stop_strings)
    groups, _ = rollout(engine, lambda: env, [task], 1, params, Budget(3, 48, 144, 20.0))
    [scored] = score_groups(spec.make_reward({}), groups)
    t = scored.trajectories[0]
    assert "time limit" in t.turns[0].observation and t.turns[0].tool_errors == 1
    assert t.infra_failure is None and t.reward == 0.0 and sum(t.loss_mask()) > 0


def test_a_failed_member_leaves_its_groups_statistics():
    """GRPO over [1, 0, 0, x] with the 4th member the machine's failure gives the other three exactly
    the advantages of the group [1, 0, 0]; its own advantage is 0 and its row trains nothing."""
    from agentic_rl.types import Task, Trajectory, Turn

    def traj(reward, infra=None):
        turn = Turn((1, 2, 3), (4, 5), (-1.0, -1.0), "a", "eos")
        return Trajectory(Task("t", "p"), (turn,), reward=reward, infra_failure=infra)

    alg = load_config("recipes/tiny.yaml").rl.algorithm
    with_failure = compute_advantages([TrajectoryGroup(Task("t", "p"), (traj(1.0), traj(0.0), traj(0.0),
                                                                       traj(1.0, "reward")))], alg)
    without = compute_advantages([TrajectoryGroup(Task("t", "p"), (traj(1.0), traj(0.0), traj(0.0)))], alg)
    for a, b in zip(with_failure[:3], without):
        torch.testing.assert_close(a, b)
    assert not with_failure[3].any()


@pytest.fixture
def flaky_env():
    """The calculator, whose reset fails for good on every third episode made."""
    made = iter(range(10_000))
    register_env(dataclasses.replace(SPEC, name="flaky-reset",
                                     make_env=lambda options: _ResetFails(2 if next(made) % 3 == 2 else 0)))
    yield "flaky-reset"
    ENVS.pop("flaky-reset", None)


def test_through_train_the_machines_failures_are_counted_and_left_out(tmp_path, flaky_env):
    """A third of the episodes fail at reset: each step counts them by kind, warns (more than 10%),
    and trains only the rest (the update's trained tokens are the scored episodes' sampled tokens)."""
    from agentic_rl.trainer import loop

    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", f"env.name={flaky_env}",
                                            "rl.algorithm.entropy_coef=0.01"])
    with pytest.warns(UserWarning, match="failed on the machine's side"):
        loop.train(cfg)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert len(rl) == 2 and all(r["infra_failures/reset"] > 0 for r in rl)
    assert all(r["infra_failure_frac"] == pytest.approx(r["infra_failures/reset"] / 8) for r in rl)
    for r in rl:  # 8 episodes of 24 generated tokens each; the failed ones generated and train nothing
        assert r["trained_tokens"] == 24 * (8 - r["infra_failures/reset"])
