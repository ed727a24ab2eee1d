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


def test_an_asynchronous_state_write_holds_a_copy_of_weights_and_moments(tiny):
    """The background writer's snapshot: weights 4P + Adam 8P (+ a critic model's 12P); none when
    states are written synchronously (the default)."""
    P = sum(p.numel() for p in tiny.parameters())
    assert estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml"))["state_copy"] == 0
    on = ["checkpoint.async_save=true"]
    assert estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", on))["state_copy"] == 12 * P
    critic = load_config("recipes/tiny.yaml", [*on, "rl.advantage=gae", "rl.critic=model"])
    assert estimate_rl_bytes(tiny, critic)["state_copy"] == 24 * P


def test_activation_term_follows_the_rows_of_a_micro_batch(tiny):
    """Without a prompt every activation byte belongs to a row: twice the rows, twice the bytes. One
    group per micro-batch, a group of 8 is twice a group of 4; with `rl.micro_batch_rows: 8` two
    groups of 4 share a micro-batch and cost what one group of 8 does."""
    act = lambda *o: estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", list(o)), 0)["activations"]  # noqa: E731
    small = act("rl.group_size=4", "rl.micro_batch_rows=1")
    assert act("rl.group_size=8", "rl.micro_batch_rows=1") == 2 * small
    assert act("rl.group_size=4", "rl.micro_batch_rows=8") == act("rl.group_size=8", "rl.micro_batch_rows=8") == 2 * small


def test_the_shared_prompt_counts_once_and_only_sampled_tokens_get_logits(tiny):
    """The trainer forwards a group's prompt once and repeats its KV cache, and turns only sampled
    tokens into logits. So p more prompt tokens add p * L * 34H * 2 bytes (the layer term, once, not
    G times, and no vocabulary term); one more generated token per row adds G * (L * 34H * 2 + 4V): the
    chunked projection keeps only the logits, fp32 at most; 12V on the plain path an entropy bonus takes."""
    cfg = load_config("recipes/tiny.yaml", ["rl.group_size=4", "rl.micro_batch_rows=4"])
    conf = tiny.config
    layer = conf.num_hidden_layers * 34 * conf.hidden_size * 2
    base = estimate_rl_bytes(tiny, cfg, prompt_tokens=0)["activations"]
    assert estimate_rl_bytes(tiny, cfg, prompt_tokens=512)["activations"] - base == 512 * layer
    cfg.rollout.max_episode_tokens += 1
    assert estimate_rl_bytes(tiny, cfg, prompt_tokens=0)["activations"] - base == 4 * (layer + 4 * conf.vocab_size)
    cfg.rl.entropy_coef = 0.01
    cfg.rollout.max_episode_tokens -= 1
    plain = estimate_rl_bytes(tiny, cfg, prompt_tokens=0)["activations"]
    cfg.rollout.max_episode_tokens += 1
    assert estimate_rl_bytes(tiny, cfg, prompt_tokens=0)["activations"] - plain == 4 * (layer + 12 * conf.vocab_size)
    cfg.rl.entropy_coef = 0.0
    cfg.rl.micro_batch_rows = 8  # two groups, two prompts (they share only the system prompt)
    assert (estimate_rl_bytes(tiny, cfg, prompt_tokens=512)["activations"]
            - estimate_rl_bytes(tiny, cfg, prompt_tokens=0)["activations"]) == 2 * 512 * layer


def test_teachers_add_their_weights_and_logits(tiny):
    """Each OPD teacher holds a frozen copy (4P); their logits over a micro-batch's sampled tokens add
    R*E*4V (the tiny recipe: two groups of 4, R = 8 rows)."""
    P = sum(p.numel() for p in tiny.parameters())
    cfg = load_config("recipes/tiny.yaml")
    cfg.distill.teachers = ["a", "b"]
    parts = estimate_rl_bytes(tiny, cfg)
    generated = 8 * cfg.rollout.max_episode_tokens
    assert parts["teachers"] == 8 * P and parts["teacher_logits"] == generated * 4 * tiny.config.vocab_size


def test_too_little_memory_stops_with_the_knobs(tiny):
    cfg = load_config("recipes/tiny.yaml")
    need = check_memory(tiny, cfg, 512, available=1e12)["mem_estimate_gb"]
    with pytest.raises(MemoryBudgetError, match="Lower rl.group_size"):
        check_memory(tiny, cfg, 512, available=need * GB / 2)
    cfg.model.memory_check = False  # the user's override: warned by the estimate, tries anyway
    assert check_memory(tiny, cfg, 512, available=need * GB / 2)["mem_estimate_gb"] == need


def test_checkpointing_keeps_only_layer_inputs_of_the_rows(tiny):
    """With `model.gradient_checkpointing` a row's token costs L * 4H (each layer's fp32 input) + 34H * 2
    (the one layer being recomputed) instead of L * 34H * 2; the shared prompt (one group here) is
    forwarded once, not checkpointed, at the full L * 34H * 2. Without a prompt: activations =
    tokens * layer + generated * 4V, tokens = generated."""
    conf = tiny.config
    L, H, V = conf.num_hidden_layers, conf.hidden_size, conf.vocab_size
    opts = ["rl.group_size=4", "rl.micro_batch_rows=4", "rollout.max_turns=1"]
    plain = estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", opts), 0)["activations"]
    ckpt = lambda p: estimate_rl_bytes(tiny, load_config("recipes/tiny.yaml", [*opts, "model.gradient_checkpointing=true"]), p)["activations"]  # noqa: E731
    generated = 4 * load_config("recipes/tiny.yaml").rollout.max_episode_tokens
    assert plain == generated * (L * 34 * H * 2 + 4 * V)
    assert ckpt(0) == generated * (L * 4 * H + 34 * H * 2 + 4 * V)
    assert ckpt(10) - ckpt(0) == 10 * L * 34 * H * 2
