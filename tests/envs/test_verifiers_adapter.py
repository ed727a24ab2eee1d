"""The verifiers adapter on environments built with verifiers (v0.4, `verifiers.v1`) in memory
(tests/envs/vf_fixtures.py): episodes run through our rollout loop with the real tokenizer, and
the reward is what verifiers' own `Task.score` gives on the same transcript, read from a trace in
its wire form (as `traces.jsonl` holds it) and checked by hand as the weighted sum."""

from __future__ import annotations

import asyncio
import threading

import pytest
import verifiers.v1 as vf

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.base import close_env
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.conformance import check_env
from agentic_rl.rollout.loop import Budget, rollout

SINGLE, TOOLS = "vf:tests.envs.vf_fixtures:single_turn", "vf:tests.envs.vf_fixtures:tools"


def _package(tmp_path, monkeypatch, name: str, env: str) -> str:
    """A verifiers package exporting the guessing game's taskset and `env`, loaded by id the way
    `vf eval ID` loads one."""
    (tmp_path / f"{name}.py").write_text(
        f"from tests.envs.vf_fixtures import {env}, GuessTaskset\n\n__all__ = ['{env}', 'GuessTaskset']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"vf:{name}"


@pytest.fixture
def guess_game(tmp_path, monkeypatch):
    return _package(tmp_path, monkeypatch, "vf_guess_game", "GuessEnv")


def _play(name, tokenizer, tasks, script):
    spec, envs = get_env(name), []

    def make():
        envs.append(spec.make_env({}))
        return envs[-1]
    params = SamplingParams(1.0, 1.0, 64, ("</tool_call>",))
    try:
        groups, _ = rollout(ScriptedEngine(tokenizer, script), make, tasks, 1, params, Budget(8, 64, 512))
    finally:
        for env in envs:
            close_env(env)
    return [g.trajectories[0] for g in score_groups(spec.make_reward({}), groups)]


def _theirs(name, task, messages):
    """verifiers' own score of `messages`: a trace validated from its wire form, scored by the task."""
    source = get_env(name).make_env({}).source
    vf_task = source.tasks[task.meta["idx"]]
    nodes = [{"parent": i - 1 if i else None, "message": m, "sampled": m["role"] == "assistant"}
             for i, m in enumerate(messages)]
    trace = vf.Trace.model_validate({"task": {"type": "t", "data": vf_task.data.model_dump()},
                                     "agent": {"config": {}}, "nodes": nodes})
    asyncio.run(vf_task.score(trace))
    return trace


def test_single_turn_rewards_and_weights_equal_verifiers_own(tokenizer):
    spec = get_env(SINGLE)
    tasks = spec.tasks("train", 3, 0)
    replies = [tasks[0].answer, f"The answer is {tasks[1].answer}.", "7"]
    eos = tokenizer.eos_token
    trajs = _play(SINGLE, tokenizer, tasks, lambda row, turn: replies[row] + eos)
    for task, traj, reply in zip(tasks, trajs, replies):
        opening = [{"role": "system", "content": "You add numbers."}, {"role": "user", "content": task.prompt}]
        theirs = _theirs(SINGLE, task, [*opening, {"role": "assistant", "content": reply}])
        assert traj.terminated and traj.reward == pytest.approx(theirs.reward, abs=1e-12)  # the same float sums
        assert {k: traj.reward_details[k] for k in theirs.rewards} == {k: r.score for k, r in theirs.rewards.items()}
        # by hand: correct (weight 1), digits only (0.5), long_reply (-0.25, length / 40 capped at 1)
        hand = (reply == task.answer) + 0.5 * reply.isdigit() - 0.25 * min(len(reply) / 40, 1.0)
        assert traj.reward == pytest.approx(hand, abs=1e-12)
        assert traj.reward_details["metric/turns"] == 1.0
    assert len({t.reward for t in trajs}) == 3  # the three replies score apart


def test_toolset_tools_are_called_and_scored_as_verifiers_scores_them(tokenizer):
    spec = get_env(TOOLS)
    tasks = spec.tasks("train", 2, 1)
    env = spec.make_env({})
    env.reset(tasks[0])
    assert [s["function"]["name"] for s in env.tool_schemas] == ["multiply", "square"]
    a, b = (int(x) for x in tasks[0].prompt.split("What is ")[1].split("?")[0].split(" * "))
    call = f'<tool_call>{{"name": "multiply", "arguments": {{"a": {a}, "b": {b}}}}}</tool_call>'
    assert env.step('<tool_call>{"name": "square", "arguments": {"x": 12}}</tool_call>').observation[0]["content"] == "144"
    env.close()
    script = lambda row, turn: (call if turn == 0 else f"{a * b}{tokenizer.eos_token}") if row == 0 else "no idea" + tokenizer.eos_token  # noqa: E731
    used, skipped = _play(TOOLS, tokenizer, tasks, script)
    assert used.turns[0].observation == str(a * b) and used.terminated and len(skipped.turns) == 1
    system = {"role": "system", "content": "You multiply with a tool."}
    theirs = _theirs(TOOLS, tasks[0], [
        system, {"role": "user", "content": tasks[0].prompt},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "name": "multiply", "arguments": f'{{"a": {a}, "b": {b}}}'}]},
        {"role": "tool", "tool_call_id": "c", "content": str(a * b)}, {"role": "assistant", "content": str(a * b)}])
    assert used.reward == pytest.approx(theirs.reward, abs=1e-12) and used.reward == pytest.approx(1.2)
    theirs = _theirs(TOOLS, tasks[1], [system, {"role": "user", "content": tasks[1].prompt},
                                       {"role": "assistant", "content": "no idea"}])
    assert skipped.reward == theirs.reward == 0.0


def test_the_envs_own_run_answers_each_guess_and_ends_the_episode(tokenizer, guess_game):
    spec = get_env(guess_game)
    tasks = spec.tasks("train", 2, 0)
    secret = (7 * tasks[0].meta["idx"]) % 20 + 1
    guesses = [["0", "25", str(secret)], ["1", "1", "1", "1", "1", "1"]]
    trajs = _play(guess_game, tokenizer, tasks, lambda row, turn: guesses[row][turn] + tokenizer.eos_token)
    found, stuck = trajs
    assert [t.observation for t in found.turns] == ["higher", "lower", ""] and found.terminated
    assert len(stuck.turns) == 5 and stuck.terminated  # run() gives five guesses, then returns
    opening = [{"role": "system", "content": "You play a guessing game."}, {"role": "user", "content": tasks[0].prompt}]
    theirs = _theirs(guess_game, tasks[0], [*opening, {"role": "assistant", "content": "0"}, {"role": "user", "content": "higher"},
                                            {"role": "assistant", "content": "25"}, {"role": "user", "content": "lower"},
                                            {"role": "assistant", "content": str(secret)}])
    assert found.reward == pytest.approx(theirs.reward, abs=1e-12) and found.reward == pytest.approx(1 + 0.1 / 3)
    assert stuck.reward == pytest.approx(0.1 / 5)
    assert not [t for t in threading.enumerate() if t.name == "vf-env-run"]  # every run has returned


def test_an_env_whose_run_raises_fails_the_episode_as_the_envs_fault(tokenizer, tmp_path, monkeypatch):
    name = _package(tmp_path, monkeypatch, "vf_raising_game", "RaisingEnv")
    (traj,) = _play(name, tokenizer, get_env(name).tasks("train", 1, 0), lambda row, turn: "3" + tokenizer.eos_token)
    assert traj.infra_failure == "env_step" and "the board is on fire" in traj.error


@pytest.mark.parametrize("name", [SINGLE, TOOLS, "guess"])
def test_check_env_passes(name, tokenizer, guess_game):
    checks = check_env(guess_game if name == "guess" else name, tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
