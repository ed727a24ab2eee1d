"""The recipe's `reward:` section through the real loop: each RL step logs every component as
`reward/<name>` and every hacking detector's rate as `hacking/<name>`, and the episodes' rewards
are the composition of their logged values; a name the registries lack fails at load."""

from __future__ import annotations

import json
import shutil

import pytest

from agentic_rl.errors import ConfigError
from agentic_rl.rewards.compose import combine
from agentic_rl.rewards.hacking import HACKING_DETECTORS
from agentic_rl.trainer import loop
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import load_config

SECTION = ["reward.components=[{name: outcome}, {name: format, weight: 0.1, gate: outcome}, "
           "{name: tool_match, weight: 0.2}, {name: confidence, weight: 0.3}]",
           "reward.penalties=[{name: unused_tool_result, weight: 0.5}]"]


def test_each_step_logs_the_components_and_the_hacking_rates(tmp_path):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "log.trajectories_per_step=8", *SECTION])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert len(rl) == 2
    for r in rl:
        assert {f"reward/{n}" for n in ("outcome", "format", "tool_match", "confidence", "unused_tool_result")} <= set(r)
        assert {f"hacking/{n}" for n in HACKING_DETECTORS.names()} <= set(r)
        assert 0 < r["reward/confidence"] < 1  # exp(mean logprob) of the tiny model's sampled tokens
    episodes = [json.loads(line) for line in (tmp_path / "trajectories" / "rl.jsonl").read_text().splitlines()]
    for e in episodes:  # each reward is the section's composition of the values it logged
        d = e["reward_details"]
        assert e["reward"] == pytest.approx(combine(d, cfg.reward.components, cfg.reward.penalties), abs=1e-9)


def test_an_unknown_component_fails_at_load_naming_the_known_ones():
    cfg = load_config("recipes/tiny.yaml", ["reward.components=[{name: outcome}, {name: judge_score}]"])
    with pytest.raises(ConfigError, match=r"reward.components\[1\].name: unknown reward component 'judge_score'; "
                                          r"known: confidence, format, judge, outcome, self_consistency, tool_match"):
        check_config(cfg)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code env runs model code in the bubblewrap sandbox")
def test_the_code_envs_ladder_figures_are_logged_every_rl_step(tmp_path):
    """The producer calls the reward's step hooks: each RL row of a code run holds the ladder's
    per-tier figures for that step and its budget (the env option)."""
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "env.name=code", "env.options={ladder_budget: 0.5}",
                                            "sft.examples=0", "eval.baselines=false", "eval.tasks_per_split=1",
                                            "eval.splits=[heldout_in]", "rl.steps=1", "rl.tasks.per_step=1"])
    loop.train(cfg)
    (row,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
              if json.loads(line)["stage"] == "rl"]
    tiers = ("syntax", "examples", "full")
    assert {f"ladder/{t}/{k}" for t in tiers for k in ("calls", "pass_rate", "seconds", "cost")} <= set(row)
    assert row["ladder/budget"] == 0.5 and row["ladder/spent"] <= 0.5
    # a tier is called only for what passed the one below it
    assert row["ladder/syntax/calls"] >= row["ladder/examples/calls"] >= row["ladder/full/calls"]
