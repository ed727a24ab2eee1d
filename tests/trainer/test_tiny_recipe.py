"""The tiny recipe runs the whole loop (baselines, SFT, GRPO, eval) through the real code path:
parameters move, metrics are finite, the run folder holds what the docs promise."""

from __future__ import annotations

import json
import math

import torch

from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config

REQUIRED = ["step", "stage", "reward_mean", "reward_std", "accuracy", "loss", "entropy", "kl", "clip_frac",
            "tokens_generated", "tool_calls_per_episode", "tool_error_rate", "time_rollout_s", "time_train_s",
            "time_step_s"]


def test_tiny_recipe_trains(tmp_path, snapshot):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "rl.kl_coef=0.05"])
    results = loop.train(cfg)

    after = snapshot["model"].state_dict()
    moved = [k for k, v in snapshot["before"].items() if not torch.equal(v, after[k])]
    assert len(moved) == len(after)  # every parameter tensor was updated (full fine-tune)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl_rows = [r for r in rows if r["stage"] == "rl"]
    assert [r["step"] for r in rl_rows] == [1, 2]
    for r in rl_rows:
        assert set(REQUIRED) <= set(r)
        assert all(math.isfinite(r[k]) for k in REQUIRED if k != "stage")
    assert all(math.isfinite(r["loss"]) for r in rows if r["stage"] == "sft")
    for stage in ("base_zero_shot", "base_few_shot", "sft", "rl"):
        assert set(results[stage]) == {"heldout_in", "heldout_out", "overall"}
    assert json.loads((tmp_path / "eval.json").read_text())["rl"]["heldout_in"]["n"] == 8
    assert (tmp_path / "checkpoints" / "rl" / "config.json").exists()
    assert (tmp_path / "config.yaml").exists()
    traj = json.loads((tmp_path / "trajectories" / "rl.jsonl").read_text().splitlines()[0])
    assert len(traj["token_ids"]) == len(traj["loss_mask"])
