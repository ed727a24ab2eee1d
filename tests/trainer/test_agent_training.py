"""GRPO through the recording proxy (`rollout.agent`): the example OpenAI-SDK agent
(`examples/openai_calculator_agent.py`, which knows nothing of agentic-rl) runs every episode of a
step against the proxy; every recorded episode becomes one merged multi-turn trajectory; the
rewards the agent posts are the ones trained on."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train


def test_every_episode_of_the_example_agent_is_one_trajectory_and_grpo_trains_on_them(tmp_path):
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent.program=tests/trainer/scored_agent.py:run", "sft.examples=0",
                                             "eval.baselines=false", "eval.tasks_per_split=2",
                                             "rollout.max_turns=4", "rollout.max_episode_tokens=96",  # the agent's 4 calls x 24
                                             f"output_dir={tmp_path}"])
    train(cfg)
    rows = [json.loads(line) for line in (cfg.run_dir / "trajectories" / "rl.jsonl").open()]
    assert len(rows) == 2 * 2 * 4  # steps x tasks x group
    assert not any(t.get("restart") for r in rows for t in r["turns"])  # merged: each call extended the last
    assert all(len(r["turns"]) == 4 for r in rows)  # a random model never answers: 4 calls, nudged
    for r in rows:  # a later turn's new tokens are the tool result or the nudge, then the reply's header
        assert all(t["obs_text"].endswith("<|im_start|>assistant\n") for t in r["turns"])
        assert r["reward"] == float(sum(r["turns"][0]["action_ids"]) % 2 == 0)
    assert {r["reward"] for r in rows} == {0.0, 1.0}
    steps = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()]
    rl = [s for s in steps if s.get("stage") == "rl"]
    assert [s["step"] for s in rl] == [1, 2] and all(s["trained_tokens"] > 0 for s in rl)
    assert all(s["infra_failure_frac"] == 0 for s in rl)


def test_an_agent_that_edits_its_history_trains_each_episode_as_one_sample_of_its_group(tmp_path):
    """The first episode of the first group edits its history: its second call starts a new context
    (`restart`), and the episode is still one trajectory, so every group has its 4 samples and GRPO
    trains on them (split into separate rows, it made groups of 5 and 4, which the group statistics
    cannot take: the step raised)."""
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent.program=tests/trainer/editing_agent.py:run", "sft.examples=0",
                                             "eval.baselines=false", "eval.tasks_per_split=2", "rl.steps=1",
                                             "log.trajectories_per_step=100", f"output_dir={tmp_path}"])
    train(cfg)
    rows = [json.loads(line) for line in (cfg.run_dir / "trajectories" / "rl.jsonl").open()]
    assert len(rows) == 2 * 4  # tasks x group: one record per episode
    restarted = [bool(r["turns"][1].get("restart")) for r in rows]
    assert restarted == [True] + [False] * 7
    (rl,) = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    assert rl["trained_tokens"] > 0 and rl["infra_failure_frac"] == 0
    assert rl["context_restarts_per_episode"] == 1 / 8


def _within(seconds: float, work):
    """`work()`'s result, or the test fails when it has not returned after `seconds` (it is then left
    running on a daemon thread: the hang is the failure)."""
    out: dict = {}

    def run():
        try:
            out["result"] = work()
        except BaseException as e:  # noqa: BLE001 - raised again on the test's thread
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds:g}s: hung")
    if "error" in out:
        raise out["error"]
    return out["result"]


def _wait_for(condition, seconds: float = 30.0) -> bool:
    until = time.monotonic() + seconds
    while not condition() and time.monotonic() < until:
        time.sleep(0.05)
    return condition()


def test_an_agent_that_hangs_costs_its_episode_and_never_the_step(tiny, tokenizer):
    """Four of eight episodes hang, one of each task's two: before its first model call, between its
    two calls, after its last (each in a blocking wait nothing interrupts), or between its calls in a
    Python loop. The rollout returns once their 4 s deadline has passed (it waited forever before),
    each of them an infrastructure failure (kind `agent`, its recorded calls dropped) and the other
    four trained as they came. A hung agent's later call is refused (410) and no episode is recorded
    under its id again: the Python loop is stopped at the deadline by the timer raised in its thread
    and calls at once; the blocking waits call once released."""
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.rollout.agents import AgentRollouts
    from agentic_rl.trainer.episodes import episodes
    from tests.trainer import hanging_agent

    hanging_agent.RELEASE.clear()
    hanging_agent.LATE.clear()
    cfg = load_config("recipes/tiny.yaml", ["rollout.max_new_tokens=4"])  # short calls: well inside the deadline
    spec = get_env(cfg.env.name)
    engine = HFEngine(tiny, tokenizer, precision="fp32")
    agents = AgentRollouts(hanging_agent.run, engine, tokenizer, episodes(spec, cfg.env.options, cfg.rollout),
                           deadline_s=4.0)
    try:
        groups, stats = _within(60, lambda: agents.rollout(spec.tasks("train", 4, 0), 2, seed=0))
        hung, fine = [g.trajectories[0] for g in groups], [g.trajectories[1] for g in groups]
        assert stats.episodes == 8 and all(t.infra_failure == "agent" and not t.turns for t in hung)
        assert all("rollout.agent.timeout_s: 4s" in t.error for t in hung)
        assert all(t.infra_failure is None and len(t.turns) == 2 and "agent_reward" in t.reward_details for t in fine)
        assert _wait_for(lambda: 3 in hanging_agent.LATE) and hanging_agent.LATE == {3: 410}  # the loop, stopped
        hanging_agent.RELEASE.set()
        assert _wait_for(lambda: len(hanging_agent.LATE) == 4) and hanging_agent.LATE == dict.fromkeys(range(4), 410)
        assert not agents.proxy.recorder.episodes
    finally:
        hanging_agent.RELEASE.set()
        agents.close()


def test_hung_agent_episodes_are_counted_in_every_step_and_the_run_ends(tmp_path):
    """The whole loop: an agent that hangs in one episode of each of the first two tasks of every
    rollout (each RL step's, and the held-out evaluations') runs to the end; each step counts its 2
    infrastructure failures of kind `agent` among 8 episodes and trains the rest, and the final
    evaluation reports one in each split (its one task a split, greedy: the first two tasks)."""
    from tests.trainer import hanging_agent

    hanging_agent.RELEASE.clear()
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent.program=tests.trainer.hanging_agent:run", "sft.examples=0",
                                             "eval.baselines=false", "eval.tasks_per_split=1", "rollout.max_new_tokens=4",
                                             "rollout.agent.timeout_s=4", f"output_dir={tmp_path}"])
    try:
        _within(300, lambda: train(cfg))
    finally:
        hanging_agent.RELEASE.set()
    rl = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    assert [s["step"] for s in rl] == [1, 2]
    assert all(s["infra_failures/agent"] == 2 and s["infra_failure_frac"] == 2 / 8 and s["trained_tokens"] > 0 for s in rl)
    final = json.loads((cfg.run_dir / "eval.json").read_text())["rl"]
    assert final["heldout_in"]["infra_failures"] == final["heldout_out"]["infra_failures"] == 1


@pytest.mark.parametrize(("budget", "agent"), [("turns", "run"), ("tokens", "run_scored")])
def test_proxy_episodes_end_at_the_recipe_budget_as_counted_truncations(tmp_path, budget, agent):
    """An agent that never stops by itself (12 calls; it made them all before) is stopped by the
    recipe's budget: at 3 calls (`rollout.max_turns`), or at 40 generated tokens
    (`rollout.max_episode_tokens`, 24 a call: the second reply is cut at 16 tokens, its stop reason
    `length`). Every episode is a truncation, counted in the step's `truncation_rate`, never an
    infrastructure failure, and trained: scored by the env's verifier when the agent lets the refusal
    raise (`run`, here at the turn budget), by the reward it posts when it catches it (`run_scored`,
    at the token budget)."""
    turns, tokens = (3, 1000) if budget == "turns" else (12, 40)
    cfg = load_config("recipes/tiny.yaml", [f"rollout.agent.program=tests/trainer/persistent_agent.py:{agent}", "sft.examples=0",
                                             "eval.baselines=false", "eval.tasks_per_split=1", "rl.steps=1",
                                             f"rollout.max_turns={turns}", f"rollout.max_episode_tokens={tokens}",
                                             "log.trajectories_per_step=100", f"output_dir={tmp_path}"])
    _within(300, lambda: train(cfg))
    rows = [json.loads(line) for line in (cfg.run_dir / "trajectories" / "rl.jsonl").open()]
    assert len(rows) == 8 and all(r["truncated"] and not r["terminated"] for r in rows)
    generated = [[len(t["action_ids"]) for t in r["turns"]] for r in rows]
    assert all(len(g) <= turns and sum(g) <= tokens for g in generated)
    if budget == "turns":
        assert all(len(g) == turns for g in generated)
    else:  # cut where the budget ran out (a random model seldom ends a reply before 24 tokens)
        cut = [r for r, g in zip(rows, generated) if sum(g) == tokens]
        assert cut and all(r["turns"][-1]["stop_reason"] == "length" for r in cut)
    (rl,) = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    assert rl["truncation_rate"] == 1.0 and rl["infra_failure_frac"] == 0
    if agent == "run_scored":  # the posted parity rewards: spread, so the truncated episodes train
        assert all("agent_reward" in r["reward_details"] for r in rows) and rl["trained_tokens"] > 0
    else:  # the verifier's scores (all 0 on a random model: no spread, nothing to train)
        assert all("agent_reward" not in r["reward_details"] and "correct" in r["reward_details"] for r in rows)


def test_agent_episodes_produced_ahead_train_at_the_staleness_the_schedule_says(tmp_path):
    """`rl.max_staleness: 1` with an async agent: each step's batch is produced by the producer's
    thread while the previous step updates. Every call of batch s was sampled by the weights of step
    s - 2 (version max(s - 2, 0)), as its replies said, so no batch mixes versions; the steps'
    staleness is 0, 1, 1 and each trains."""
    from agentic_rl.trainer.producer import BATCH_SEED_STRIDE
    from tests.trainer import versioned_agent

    versioned_agent.VERSIONS.clear()
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent.program=tests.trainer.versioned_agent:run_async",
                                             "rl.max_staleness=1", "rl.steps=3", "sft.examples=0", "eval.baselines=false",
                                             "eval.tasks_per_split=1", "rollout.max_new_tokens=8", f"output_dir={tmp_path}"])
    _within(300, lambda: train(cfg))
    rl = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    assert [s["staleness"] for s in rl] == [0, 1, 1]
    assert all(s["trained_tokens"] > 0 and s["infra_failure_frac"] == 0 for s in rl)
    seen: dict[int, set[int]] = {}
    for eid, versions in versioned_agent.VERSIONS.items():
        if eid.startswith("s"):  # a step's episode (the evaluation's are eval...)
            step = int(eid[1:].split("-")[0]) - cfg.rl.seed * BATCH_SEED_STRIDE
            seen.setdefault(step, set()).update(versions)
    assert seen == {1: {0}, 2: {0}, 3: {1}}


@pytest.mark.slow
def test_agent_episodes_on_our_managed_server_train_and_reach_its_new_weights(tmp_path):
    """`rollout.engine.name: managed` (an `agentic-rl serve` child process) with the agent: the proxy
    forwards every call to it, the replies of step s's episodes say version s - 1 (each sync reached
    the server), every step trains, and the weight-sync probe held on every sync."""
    from tests.trainer import versioned_agent

    versioned_agent.VERSIONS.clear()
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent.program=tests.trainer.versioned_agent:run",
                                             "rollout.engine.name=managed", "sft.examples=0", "eval.baselines=false",
                                             "eval.tasks_per_split=1", "rollout.max_new_tokens=8", f"output_dir={tmp_path}"])
    _within(600, lambda: train(cfg))
    rl = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    assert [s["step"] for s in rl] == [1, 2]
    assert all(s["trained_tokens"] > 0 and s["infra_failure_frac"] == 0 and s["sync_probe_gap"] < 1e-3 for s in rl)
    steps = {eid.split("-")[0]: set(v) for eid, v in versioned_agent.VERSIONS.items() if eid.startswith("s")}
    assert sorted(map(frozenset, steps.values()), key=min) == [{0}, {1}]
