"""GRPO through the recording proxy with each harness example (`examples/`) on the tiny model: a few
RL steps of the real loop, every recorded episode one trajectory of the contexts its framework's
history gives, no infrastructure failure, and the trained tokens exactly the sampled ones (the
rewards alternate within each group, `scored_harnesses.py`, so every episode trains)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train

STEPS, GROUP = 2, 2


def _run(tmp_path, agent: str, overrides=()) -> tuple[list[dict], list[dict]]:
    cfg = load_config("recipes/tiny.yaml", [f"rollout.agent.program=tests/examples/scored_harnesses.py:{agent}",
                                             "sft.examples=0", "eval.baselines=false", "eval.tasks_per_split=1",
                                             f"rl.steps={STEPS}", "rl.tasks.per_step=1", f"rl.tasks.group_size={GROUP}",
                                             "log.trajectories_per_step=100", f"output_dir={tmp_path}", *overrides])
    train(cfg)
    rows = [json.loads(line) for line in (cfg.run_dir / "trajectories" / "rl.jsonl").open()]
    steps = [s for s in (json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()) if s.get("stage") == "rl"]
    return rows, steps


def _assert_trained_as_sampled(rows: list[dict], steps: list[dict]) -> None:
    """One record an episode, each with its alternating reward; no failure; each step trains
    exactly the sampled tokens of its episodes (the loss mask is 1 on them and nowhere else)."""
    assert len(rows) == STEPS * GROUP and [s["step"] for s in steps] == list(range(1, STEPS + 1))
    assert all(r["error"] is None and r["turns"] and not r["turns"][0].get("restart") for r in rows)
    assert sorted(r["reward"] for r in rows) == [0.0, 0.0, 1.0, 1.0]
    for r in rows:
        assert sum(r["loss_mask"]) == sum(len(t["action_ids"]) for t in r["turns"])
    for s in steps:
        sampled = sum(sum(r["loss_mask"]) for r in rows if r["step"] == s["step"])
        assert s["infra_failure_frac"] == 0 and s["trained_tokens"] == sampled > 0


def _restarts(row: dict) -> list[bool]:
    return [bool(t.get("restart")) for t in row["turns"][1:]]


@pytest.mark.parametrize("agent", [pytest.param("langgraph", marks=pytest.mark.slow), "agents_sdk"])  # langgraph's import: ~10 s
def test_tool_calling_harnesses_train_one_trajectory_an_episode(tmp_path, agent):
    """LangGraph's and the Agents SDK's histories are whole: never a second context."""
    pytest.importorskip("langgraph" if agent == "langgraph" else "agents")
    rows, steps = _run(tmp_path, agent)
    _assert_trained_as_sampled(rows, steps)
    assert not any(any(_restarts(r)) for r in rows)


@pytest.mark.slow  # ~3k-token prompts of smolagents' system prompt
def test_smolagents_trains_its_episodes_with_the_contexts_its_history_gives(tmp_path):
    """smolagents writes a reply back stripped and with `</code>` appended when it lacks one: a call
    after such a reply starts a new context. A random reply is never kept as written, so every later
    call restarts."""
    pytest.importorskip("smolagents")
    rows, steps = _run(tmp_path, "smolagents", ["rollout.max_turns=3", "rollout.max_episode_tokens=72"])
    _assert_trained_as_sampled(rows, steps)
    for r in rows:
        kept = [t["action_text"].removesuffix("<|im_end|>").strip() == t["action_text"].removesuffix("<|im_end|>")
                and t["action_text"].rstrip().endswith("</code>") for t in r["turns"][:-1]]
        assert _restarts(r) == [not k for k in kept]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.slow  # a repository sandbox an episode, ~2k-token prompts
def test_mini_swe_agent_trains_its_episodes_with_the_contexts_its_history_gives(tmp_path):
    """mini-swe-agent drops a reply that is not exactly one action from its history (a format error,
    answered by a user message): the next call starts a new context. It stops after 3 such errors
    in a row."""
    pytest.importorskip("minisweagent")
    rows, steps = _run(tmp_path, "mini_swe", ["env.name=swe_repair", "eval.splits=[test]", "rollout.max_turns=8",
                                              "rollout.max_episode_tokens=192"])
    _assert_trained_as_sampled(rows, steps)
    for r in rows:
        actions = [len(re.findall(r"```mswea_bash_command\s*\n(.*?)\n```", t["action_text"], re.DOTALL))
                   for t in r["turns"][:-1]]
        assert _restarts(r) == [n != 1 for n in actions]
