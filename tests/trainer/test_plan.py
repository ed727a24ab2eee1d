"""`agentic-rl train RECIPE --dry-run`: the launch checked, its plan printed, nothing trained or written."""

from __future__ import annotations

import json

from agentic_rl.cli import main


def test_a_dry_run_prints_the_plan_and_leaves_no_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "recipes/tiny.yaml", "--dry-run", "--set", f"output_dir={out}"]) == 0
    plans = json.loads(capsys.readouterr().out)
    assert [p["rank"] for p in plans] == [0] and plans[0]["world_size"] == 1
    assert plans[0]["parameters_m"] > 0 and plans[0]["mem_estimate_gb"] > 0
    assert not out.exists()


def test_a_dry_run_fails_on_a_recipe_mistake_as_training_would(tmp_path, capsys):
    assert main(["train", "recipes/tiny.yaml", "--dry-run", "--set", "rollout.rng=sometimes"]) == 2
    assert "rollout.rng" in capsys.readouterr().err
