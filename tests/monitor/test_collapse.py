"""The echo-trap monitor warns while reward still holds, and through `train()` its warning and the
remedies the recipe names are logged as events."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from agentic_rl.monitor.collapse import CollapseMonitor, Indicators
from agentic_rl.monitor.metrics import RewardSpread
from agentic_rl.trainer.config import load_config


def _collapsing_run(steps: int = 20):
    """Healthy for 6 steps; then reward spread and entropy decay and zero-std groups grow while the
    mean reward holds; from step 14 the mean reward falls too (the echo trap, RAGEN Fig. 3-style)."""
    for s in range(1, steps + 1):
        decay = max(0, s - 6) / 8  # 0 until step 6, 1 at step 14
        reward = 0.6 if s < 14 else 0.6 - 0.05 * (s - 13)
        yield Indicators(step=s, reward_mean=reward, reward_std=0.4 * (1 - 0.9 * min(decay, 1)),
                         entropy=0.8 * (1 - 0.8 * min(decay, 1)), frac_zero_std_groups=0.1 + 0.8 * min(decay, 1))


def test_warning_fires_before_reward_falls():
    monitor = CollapseMonitor(window=3)
    fired = [r.step for r in _collapsing_run() if monitor.update(r)]
    assert fired and fired[0] < 14  # ahead of the reward drop
    first = CollapseMonitor(window=3)
    evidence = next(w for r in _collapsing_run() if (w := first.update(r)))["evidence"]
    assert set(evidence) & {"reward_std", "entropy", "frac_zero_std_groups"}
    assert all(v["now"] != v["best_window"] for v in evidence.values())


def test_a_reward_that_falls_too_fast_for_the_leading_indicators_is_a_reward_collapse():
    """The trajectory of a measured SmolLM2 run (privileged self-distillation with a forward KL):
    reward 0.42, 0.23, 0.25, 0.13, 0.02, 0.02 while spread, entropy and zero-std groups gave no
    lead. Windows of 3: best 0.30 (steps 1-3), now 0.05 (steps 4-6) < 0.5 x 0.30: an event at step
    6, the first step with two windows. (Before, no event at all: reward had already fallen.)"""
    monitor = CollapseMonitor(window=3)
    rewards = [0.42, 0.23, 0.25, 0.13, 0.02, 0.02, 0.0, 0.0]
    events = [(s, e) for s, r in enumerate(rewards, 1)
              if (e := monitor.update(Indicators(step=s, reward_mean=r, reward_std=0.3, entropy=0.2,
                                                 frac_zero_std_groups=0.5)))]
    assert [(s, e["event"]) for s, e in events] == [(6, "reward_collapse")]
    assert events[0][1]["evidence"]["reward_mean"]["best_window"] == pytest.approx(0.3)
    assert events[0][1]["evidence"]["reward_mean"]["now"] == pytest.approx(0.17 / 3)


def test_a_step_is_watched_through_its_typed_record():
    """`StepRecord.indicators()`: the monitor's values are the record's reward spread and update
    health; a step whose every episode the machine failed (no spread) adds to the entropy series only."""
    from agentic_rl.trainer.stats import StepRecord, UpdateHealth

    record = StepRecord(step=3, rollout={}, update={}, sampler={}, weight_version=3, lr=1e-3,
                        rollout_stats=SimpleNamespace(seconds=1.0, generated_tokens=1), seconds=1.0, groups_sampled=2,
                        groups_kept=2, memory={},
                        rewards=RewardSpread(mean=0.5, std=0.2, frac_zero_std_groups=0.25),
                        health=UpdateHealth(loss=0.1, grad_norm=1.0, entropy=0.7, nonfinite_minibatches=0))
    assert record.indicators() == Indicators(step=3, reward_std=0.2, frac_zero_std_groups=0.25, entropy=0.7,
                                             reward_mean=0.5)
    monitor = CollapseMonitor()
    for r in (record, replace(record, rewards=None)):
        monitor.update(r.indicators())
    assert monitor.history == {"reward_std": [0.2], "frac_zero_std_groups": [0.25], "entropy": [0.7, 0.7],
                               "reward_mean": [0.5]}


def test_a_healthy_run_never_warns():
    monitor = CollapseMonitor(window=3)
    steady = (Indicators(step=s, reward_mean=0.5 + 0.01 * s, reward_std=0.4, entropy=0.7, frac_zero_std_groups=0.2)
              for s in range(30))
    assert not any(monitor.update(r) for r in steady)


def test_the_tiny_recipe_logs_warning_and_remediation_events(tmp_path, monkeypatch):
    """Through `train()`: a monitor forced to see a collapse logs the warning and the actions, and the
    next step trains with them. The tiny model's rewards are all 0, so step 1 has nothing to train;
    the entropy bonus the remedy adds after it makes step 2 train every group for that term."""
    from agentic_rl.monitor import collapse
    from agentic_rl.trainer import loop

    monkeypatch.setattr(collapse.CollapseMonitor, "evidence", lambda self: {"entropy": {"best_window": 1.0, "now": 0.1}})
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "rl.collapse.actions=[entropy_bonus, lower_lr]"])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    events = [r for r in rows if r["stage"] == "event" and r["event"] not in ("machine", "memory_estimate")]
    assert [e.get("action", e["event"]) for e in events[:3]] == ["collapse_warning", "entropy_bonus", "lower_lr"]
    assert events[0]["step"] == 1
    rl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"stage": "rl"' in line]
    assert [r["groups_trained"] for r in rl] == [0, 2]
    assert rl[1]["loss"] < 0 and rl[1]["lr"] == pytest.approx(5e-4)  # -1e-3 x the entropy; the halved lr
