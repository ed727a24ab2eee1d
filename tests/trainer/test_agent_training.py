"""GRPO through the recording proxy (`rollout.agent`): the example OpenAI-SDK agent
(`examples/openai_calculator_agent.py`, which knows nothing of agentic-rl) runs every episode of a
step against the proxy; every recorded episode becomes one merged multi-turn trajectory; the
rewards the agent posts are the ones trained on."""

from __future__ import annotations

import json

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train


def test_every_episode_of_the_example_agent_is_one_trajectory_and_grpo_trains_on_them(tmp_path):
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent=tests/trainer/scored_agent.py:run", "sft.examples=0",
                                             "eval.baselines=false", "eval.tasks_per_split=2",
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
    cfg = load_config("recipes/tiny.yaml", ["rollout.agent=tests/trainer/editing_agent.py:run", "sft.examples=0",
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
