"""The RL prompt pool: `rl.tasks.mix` sets its shares; without one it is the splits' own stream."""

from __future__ import annotations

from collections import Counter

from agentic_rl.envs.registry import get_env
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.rl_loop import rl_pool


def test_rl_pool_takes_the_mix_and_is_the_stream_without_one():
    """rl.steps=5 x rl.tasks.per_step=4 x rl.tasks.pool=2 = 40 prompts; 1 : 1 : 3 of 40 is 8 / 8 / 24 exactly.
    Without a mix the pool is the train split's first 40 tasks (the stream's 3 : 4 : 3 family blocks)."""
    spec = get_env("calculator_compound")
    base = ["rl.steps=5", "rl.tasks.per_step=4", "rl.tasks.pool=2"]
    pool = lambda rl: rl_pool(spec, rl.tasks, rl.steps, rl.seed)  # noqa: E731
    mixed = pool(load_config("recipes/calculator.yaml", [*base, "rl.tasks.mix={bare: 1, one_step: 1, two_step: 3}"]).rl)
    assert load_config("recipes/calculator.yaml", base).rl.tasks.mix == {"bare": 1, "one_step": 1, "two_step": 3}
    assert Counter(t.meta["family"] for t in mixed) == {"bare": 8, "one_step": 8, "two_step": 24}
    rl = load_config("recipes/calculator.yaml", [*base, "rl.tasks.mix={}"]).rl
    plain = pool(rl)
    assert [t.id for t in plain] == [t.id for t in spec.tasks("train", 40, rl.seed)]
    assert Counter(t.meta["family"] for t in plain) == {"bare": 12, "one_step": 16, "two_step": 12}
