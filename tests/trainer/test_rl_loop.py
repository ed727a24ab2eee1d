"""The RL prompt pool: `rl.mix` sets its shares; without one it is the splits' own stream. And the
RL stage logs its greedy members' accuracy."""

from __future__ import annotations

import json
from collections import Counter

from agentic_rl.envs.registry import get_env
from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.stages import rl_pool


def test_rl_pool_takes_the_mix_and_is_the_stream_without_one():
    """rl.steps=5 x tasks_per_step=4 x task_pool=2 = 40 prompts; 1 : 1 : 3 of 40 is 8 / 8 / 24 exactly.
    Without a mix the pool is the train split's first 40 tasks (the stream's 3 : 4 : 3 family blocks)."""
    spec = get_env("calculator_compound")
    base = ["rl.steps=5", "rl.tasks_per_step=4", "rl.task_pool=2"]
    mixed = rl_pool(spec, load_config("recipes/calculator.yaml", [*base, "rl.mix={bare: 1, one_step: 1, two_step: 3}"]).rl)
    assert load_config("recipes/calculator.yaml", base).rl.mix == {"bare": 1, "one_step": 1, "two_step": 3}  # the recipe's
    assert Counter(t.meta["family"] for t in mixed) == {"bare": 8, "one_step": 8, "two_step": 24}
    rl = load_config("recipes/calculator.yaml", [*base, "rl.mix={}"]).rl
    plain = rl_pool(spec, rl)
    assert [t.id for t in plain] == [t.id for t in spec.tasks("train", 40, rl.seed)]
    assert Counter(t.meta["family"] for t in plain) == {"bare": 12, "one_step": 16, "two_step": 12}


def test_the_tiny_recipe_logs_the_accuracy_of_its_greedy_members(tmp_path):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "rollout.greedy_per_group=1"])
    loop.train(cfg)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in records if r.get("stage") == "rl"]
    assert rl and all(0.0 <= r["greedy_accuracy"] <= 1.0 for r in rl)
