"""The echo-trap monitor warns while reward still holds, and each remediation changes what the next
step does."""

from __future__ import annotations

import json

import pytest
import torch

from agentic_rl.monitor.collapse import CollapseMonitor, Remedies, keep_top_spread
from agentic_rl.trainer.config import load_config


def _collapsing_run(steps: int = 20):
    """Healthy for 6 steps; then reward spread and entropy decay and zero-std groups grow while the
    mean reward holds; from step 14 the mean reward falls too (the echo trap, RAGEN Fig. 3-style)."""
    for s in range(1, steps + 1):
        decay = max(0, s - 6) / 8  # 0 until step 6, 1 at step 14
        reward = 0.6 if s < 14 else 0.6 - 0.05 * (s - 13)
        yield {"step": s, "reward_mean": reward, "reward_std": 0.4 * (1 - 0.9 * min(decay, 1)),
               "entropy": 0.8 * (1 - 0.8 * min(decay, 1)), "frac_zero_std_groups": 0.1 + 0.8 * min(decay, 1)}


def test_warning_fires_before_reward_falls():
    monitor = CollapseMonitor(window=3)
    fired = [r["step"] for r in _collapsing_run() if monitor.update(r)]
    assert fired and fired[0] < 14  # ahead of the reward drop
    first = CollapseMonitor(window=3)
    evidence = next(w for r in _collapsing_run() if (w := first.update(r)))["evidence"]
    assert set(evidence) & {"reward_std", "entropy", "frac_zero_std_groups"}
    assert all(v["now"] != v["best_window"] for v in evidence.values())


def test_a_healthy_run_never_warns():
    monitor = CollapseMonitor(window=3)
    steady = ({"reward_mean": 0.5 + 0.01 * s, "reward_std": 0.4, "entropy": 0.7, "frac_zero_std_groups": 0.2}
              for s in range(30))
    assert not any(monitor.update(r) for r in steady)


def test_each_remediation_changes_the_next_step(tiny, make_group):
    rl = load_config("recipes/tiny.yaml").rl
    opt = torch.optim.AdamW(tiny.parameters(), lr=1e-3)
    remedies = Remedies(rl, opt, tiny)
    remedies.mark_healthy()
    healthy = {k: v.clone() for k, v in tiny.state_dict().items()}
    with torch.no_grad():
        next(tiny.parameters()).add_(1.0)  # the run drifts after the healthy point
    events = remedies.apply(["variance_filter", "entropy_bonus", "clip_high", "lower_lr", "rollback"])
    assert [e["action"] for e in events] == ["variance_filter", "entropy_bonus", "clip_high", "lower_lr", "rollback"]
    assert rl.variance_keep == 0.5 and rl.entropy_coef > 0 and rl.clip_high == pytest.approx(0.28)
    assert opt.param_groups[0]["lr"] == pytest.approx(5e-4)
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in healthy.items())
    # the filter really drops the low-variance groups at the next step
    groups = [make_group(i, r, torch.Generator().manual_seed(i)) for i, r in
              enumerate([[1.0, 1.0], [1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])]
    kept = keep_top_spread(groups, rl.variance_keep)
    assert [g.task.id for g in kept] == ["1", "3"]


def test_the_tiny_recipe_logs_warning_and_remediation_events(tmp_path, monkeypatch):
    """Through `train()`: a monitor forced to see a collapse logs the warning and the actions."""
    from agentic_rl.monitor import collapse
    from agentic_rl.trainer import loop

    monkeypatch.setattr(collapse.CollapseMonitor, "evidence", lambda self: {"entropy": {"best_window": 1.0, "now": 0.1}})
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "rl.collapse_actions=[entropy_bonus, lower_lr]"])
    loop.train(cfg)
    events = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
              if '"stage": "event"' in line and "memory_estimate" not in line]
    assert [e.get("action", e["event"]) for e in events[:3]] == ["collapse_warning", "entropy_bonus", "lower_lr"]
