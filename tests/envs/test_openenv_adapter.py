"""The OpenEnv adapter against a real OpenEnv server: a small env written with openenv's server API
(examples/openenv_guess.py; openenv-core ships no env of its own), served by uvicorn on loopback
from the adapter and played through openenv's own client by our rollout loop. The returns and
endings equal what the env's class gives in-process for the same seed and actions; the server is
gone once stopped."""

from __future__ import annotations

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.adapters import openenv as adapter
from agentic_rl.envs.base import close_env
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.conformance import check_env
from agentic_rl.rollout.loop import Budget, rollout

NAME = "openenv:examples.openenv_guess:app"


@pytest.fixture(scope="module")
def served():
    """The adapter's server for this file; after the tests, stopped and gone."""
    yield
    started = list(adapter._SERVERS.values())
    adapter.stop_servers()
    assert started and all(s.process.poll() is not None for s in started)  # no server left behind


def _call(guess: str) -> str:
    return f'<tool_call>{{"name": "act", "arguments": {{"action": "{guess}"}}}}</tool_call>'


def test_returns_and_endings_equal_the_envs_own(served, tokenizer):
    from examples.openenv_guess import GuessAction, GuessEnvironment, secret_of

    spec = get_env(NAME)
    tasks = spec.tasks("train", 3, 0)
    secrets = [secret_of(t.meta["seed"]) for t in tasks]
    plans = [["10", str(secrets[0])], ["0"] * 8, ["x", "7", "stop"]]  # found; six guesses then done; gives up
    script = lambda row, turn: _call(plans[row][turn]) if plans[row][turn] != "stop" else "I stop." + tokenizer.eos_token  # noqa: E731
    envs = []

    def make():
        envs.append(spec.make_env({}))
        return envs[-1]
    try:
        groups, _ = rollout(ScriptedEngine(tokenizer, script), make, tasks, 1,
                            SamplingParams(1.0, 1.0, 64, ("</tool_call>",)), Budget(10, 64, 1024))
    finally:
        for env in envs:
            close_env(env)
    trajs = [g.trajectories[0] for g in score_groups(spec.make_reward({}), groups)]
    for task, plan, traj in zip(tasks, plans, trajs):
        theirs, total, done = GuessEnvironment(), 0.0, False
        theirs.reset(seed=task.meta["seed"])
        for guess in plan[: len(traj.turns)]:
            if guess == "stop":
                break
            obs = theirs.step(GuessAction(message=guess))
            total, done = total + obs.reward, obs.done
            if done:
                break
        assert traj.reward == total and traj.terminated == done
    assert [t.reward for t in trajs] == [1.0, 0.0, 0.0] and [len(t.turns) for t in trajs] == [2, 6, 3]
    assert trajs[0].turns[0].observation == ("higher" if secrets[0] > 10 else "lower")
    assert trajs[2].truncated and not trajs[2].terminated  # stopped before the server said done


def test_check_env_passes(served, tokenizer):
    checks = check_env(NAME, tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]


def test_a_server_that_goes_away_is_the_machines_failure(served):
    spec = get_env(NAME)
    env = spec.make_env({})
    env.reset(spec.tasks("train", 1, 0)[0])
    adapter.server("examples.openenv_guess:app", ".").stop()
    result = env.step(_call("3"))
    env.close()
    assert result.truncated and result.info["infra_failure"] == "tool_backend" and "openenv server" in result.info["error"]


def test_a_killed_run_leaves_no_server(tmp_path):
    """The server dies with the process that started it, even one killed with SIGKILL (no atexit).
    A bare ASGI app stands in for an OpenEnv one here: the lifecycle is uvicorn's, and it starts in
    a second where openenv's server imports gradio."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "bare_app.py").write_text(
        "async def app(scope, receive, send):\n"
        "    if scope['type'] == 'http':\n"
        "        await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n"
        "        await send({'type': 'http.response.body', 'body': b'ok'})\n")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from agentic_rl.envs.adapters.openenv import server; "
        f"s = server('bare_app:app', {str(tmp_path)!r}); print(s.process.pid, flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    pid = int(parent.stdout.readline())
    os.kill(pid, 0)  # serving
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        time.sleep(0.1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with_status = open(f"/proc/{pid}/stat").read().split()[2]
        if with_status == "Z":  # exited, waiting for its (dead) parent's reaper
            break
    else:
        raise AssertionError(f"server {pid} outlived the run that started it")
