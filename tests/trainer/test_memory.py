"""The memory guard: the estimate's arithmetic, and a clear stop when RL would not fit."""

from __future__ import annotations

import pytest

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.memory import GB, MemoryBudgetError, check_memory, estimate_rl_bytes


def test_estimate_counts_each_copy_of_the_weights(tiny):
    """fp32 full fine-tune, no KL, no critic: weights 4P + gradients 4P + Adam 8P, no sampler copy;
    a KL reference adds 4P and a critic model 16P."""
    P = sum(p.numel() for p in tiny.parameters())
    cfg = load_config("recipes/tiny.yaml")
    parts = estimate_rl_bytes(tiny, cfg)
    assert parts["weights"] + parts["gradients"] + parts["adam_moments"] == 16 * P
    assert parts["reference"] == parts["critic_model"] == parts["sampler_copy"] == 0
    cfg = load_config("recipes/tiny.yaml", ["rl.kl_coef=0.1", "rl.advantage=gae", "rl.critic=model"])
    parts = estimate_rl_bytes(tiny, cfg)
    assert parts["reference"] == 4 * P and parts["critic_model"] == 16 * P


def test_activation_term_follows_group_size_and_episode_budget(tiny):
    small = estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", ["rl.group_size=4"]))["activations"]
    big = estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", ["rl.group_size=8"]))["activations"]
    assert big == 2 * small


def test_too_little_memory_stops_with_the_knobs(tiny):
    cfg = load_config("recipes/tiny.yaml")
    need = check_memory(tiny, cfg, 512, available=1e12)["mem_estimate_gb"]
    with pytest.raises(MemoryBudgetError, match="Lower rl.group_size"):
        check_memory(tiny, cfg, 512, available=need * GB / 2)
    cfg.model.memory_check = False  # the user's override: warned by the estimate, tries anyway
    assert check_memory(tiny, cfg, 512, available=need * GB / 2)["mem_estimate_gb"] == need
