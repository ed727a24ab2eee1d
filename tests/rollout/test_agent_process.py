"""`rollout.agent.pool: process` (`rollout/agent_process.py`): a sync agent's episodes run in worker
processes reused from episode to episode and from step to step. An agent that raises costs its
episode (kind `agent`, its traceback in the error) and its worker lives on; a worker that exits or is
killed costs its episode and is replaced; one that hangs is killed at the episode's deadline."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.agent_process import ProcessAgent
from agentic_rl.rollout.agents import AgentRollouts, load_agent
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes
from tests.rollout.process_agents import EXITS, HANGS, KILLED, RAISES

PROGRAM = "tests/rollout/process_agents.py:agent"


def _backend(tiny, tokenizer, deadline_s: float, concurrency: int = 2) -> AgentRollouts:
    cfg = load_config("recipes/tiny.yaml", ["rollout.max_new_tokens=4"])
    spec = get_env(cfg.env.name)
    agent = load_agent(PROGRAM, "process")
    assert isinstance(agent, ProcessAgent)
    return AgentRollouts(agent, HFEngine(tiny, tokenizer, precision="fp32"), tokenizer,
                         episodes(spec, cfg.env.options, cfg.rollout), deadline_s=deadline_s, concurrency=concurrency)


def _pids(path) -> dict[tuple[int, int], int]:
    rows = [line.split() for line in path.read_text().splitlines()]
    return {(int(i), int(g)): int(pid) for pid, i, g in rows}


def test_workers_are_reused_and_a_raise_an_exit_or_a_kill_costs_only_its_episode(tiny, tokenizer, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("AGENT_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("AGENT_FAILS", str(tmp_path / "fails"))
    backend = _backend(tiny, tokenizer, deadline_s=0)
    try:
        tasks = get_env("calculator").tasks("train", 4, 0)
        first, _ = backend.rollout(tasks[:2], 2, seed=0)  # a step of healthy episodes
        step1 = set(_pids(tmp_path / "pids").values())
        (tmp_path / "fails").write_text("raises,exits,killed")  # the next step's episodes fail as told
        groups, _ = backend.rollout(tasks, 2, seed=1)
        pids = _pids(tmp_path / "pids")
    finally:
        backend.close()
    assert all(t.infra_failure is None and t.reward == 0.5 for g in first for t in g.trajectories)
    assert len(step1) == 2 and os.getpid() not in step1  # 4 episodes on the 2 workers started: reused
    assert pids[(RAISES, 0)] in step1  # the next step's first episodes ran on the same workers
    raised, exited, killed = (groups[i].trajectories[0] for i in (RAISES, EXITS, KILLED))
    assert raised.infra_failure == exited.infra_failure == killed.infra_failure == "agent"
    assert "agent raised RuntimeError: the agent died" in raised.error and "Traceback" in raised.error
    assert "raise RuntimeError" in raised.error  # the agent's own line, from its worker
    assert "died (exit code 3)" in exited.error and "died (exit code -9)" in killed.error
    # every other episode ran to its reward: none was handed to a dead worker (it would have died with it)
    fine = [t for g in groups for t in g.trajectories if t not in (raised, exited, killed)]
    assert len(fine) == 5 and all(t.infra_failure is None and t.reward == 0.5 and len(t.turns) == 1 for t in fine)


@pytest.mark.slow  # waits out a deadline (~10 s)
def test_a_hung_worker_is_killed_at_the_deadline_and_replaced(tiny, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("AGENT_FAILS", str(tmp_path / "fails"))
    (tmp_path / "fails").write_text("hangs")
    deadline_s = 6.0
    backend = _backend(tiny, tokenizer, deadline_s=deadline_s)
    tasks = get_env("calculator").tasks("train", 1, 0)  # task 0: its first episode hangs
    try:
        t0 = time.monotonic()
        (group,), _ = backend.rollout(tasks, 2, seed=0)
        took = time.monotonic() - t0
        hung_pid = _pids(tmp_path / "pids")[(HANGS, 0)]
        time.sleep(2)  # the episode's timer fires a second after the deadline: the worker is killed then
        with pytest.raises(ProcessLookupError):
            os.kill(hung_pid, 0)
        (again,), _ = backend.rollout(tasks, 2, seed=1)
    finally:
        backend.close()
    hung, fine = group.trajectories
    assert hung.infra_failure == "agent" and "rollout.agent.timeout_s: 6s" in hung.error and fine.reward == 0.5
    assert took < deadline_s + 4  # given up at its deadline, not waited for
    assert Counter(t.infra_failure for t in again.trajectories)["agent"] == 1  # it hangs again, on a new worker
    assert _pids(tmp_path / "pids")[(HANGS, 0)] != hung_pid


def test_the_pool_is_a_closed_choice_checked_at_load():
    from agentic_rl.errors import ConfigError

    assert load_config("recipes/tiny.yaml", ["rollout.agent.pool=process"]).rollout.agent.pool == "process"
    assert load_config("recipes/tiny.yaml").rollout.agent.pool == "thread"
    with pytest.raises(ConfigError, match="rollout.agent.pool"):
        load_config("recipes/tiny.yaml", ["rollout.agent.pool=fork"])
