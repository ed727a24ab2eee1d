"""The memory guard: the estimate's arithmetic, and a clear stop when RL would not fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from agentic_rl.models import vocab
from agentic_rl.models.memory import (
    GB,
    KV_SPARE,
    MemoryBudgetError,
    check_memory,
    estimate_rl_bytes,
    kv_bytes_per_token,
    peak_bytes,
    plan_memory,
)
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.rl_loop import memory_shape


def shape(model, *overrides):
    """The tiny recipe's run, with `overrides`, as the estimate sees it."""
    return memory_shape(load_config("recipes/tiny.yaml", list(overrides)), model)


def test_estimate_counts_each_copy_of_the_weights(tiny):
    """fp32 full fine-tune, no KL, no critic: weights 4P + gradients 4P + Adam 8P, no sampler copy;
    a KL reference adds 4P and a critic model 16P."""
    P = sum(p.numel() for p in tiny.parameters())
    parts = estimate_rl_bytes(tiny, shape(tiny))
    assert parts["weights"] + parts["gradients"] + parts["adam_moments"] == 16 * P
    assert parts["reference"] == parts["critic_model"] == parts["sampler_copy"] == 0
    parts = estimate_rl_bytes(tiny, shape(tiny, "rl.algorithm.kl_coef=0.1", "rl.algorithm.advantage=gae",
                                          "rl.critic.kind=model"))
    assert parts["reference"] == 4 * P and parts["critic_model"] == 16 * P


def test_a_sharded_policy_splits_weights_gradients_and_moments_but_samples_from_a_whole_copy(tiny):
    """model.parallel: fsdp over 2 ranks (fp32): weights, gradients and Adam 16P / 2; two layers
    gathered whole at a time, 2 x 4P / L; the sampler's own fp32 copy 4P."""
    from dataclasses import replace

    P, L = sum(p.numel() for p in tiny.parameters()), tiny.config.num_hidden_layers
    parts = estimate_rl_bytes(tiny, replace(shape(tiny, "model.parallel=fsdp"), shards=2))
    assert parts["weights"] + parts["gradients"] + parts["adam_moments"] == pytest.approx(16 * P / 2, abs=3)
    assert parts["gathered_layers"] == 2 * 4 * P // L and parts["sampler_copy"] == 4 * P


def test_an_asynchronous_state_write_holds_a_copy_of_weights_and_moments(tiny):
    """The background writer's snapshot: weights 4P + Adam 8P (+ a critic model's 12P); none when
    states are written synchronously (the default)."""
    P = sum(p.numel() for p in tiny.parameters())
    assert estimate_rl_bytes(tiny, shape(tiny))["state_copy"] == 0
    on = "checkpoint.async_save=true"
    assert estimate_rl_bytes(tiny, shape(tiny, on))["state_copy"] == 12 * P
    critic = shape(tiny, on, "rl.algorithm.advantage=gae", "rl.critic.kind=model")
    assert estimate_rl_bytes(tiny, critic)["state_copy"] == 24 * P


def test_activation_term_follows_the_rows_of_a_micro_batch(tiny):
    """Without a prompt every activation byte belongs to a row: twice the rows, twice the bytes. One
    group per micro-batch, a group of 8 is twice a group of 4; with `rl.optim.micro_batch_rows: 8` two
    groups of 4 share a micro-batch and cost what one group of 8 does."""
    act = lambda *o: estimate_rl_bytes(tiny, shape(tiny, *o), 0)["activations"]  # noqa: E731
    small = act("rl.tasks.group_size=4", "rl.optim.micro_batch_rows=1")
    assert act("rl.tasks.group_size=8", "rl.optim.micro_batch_rows=1") == 2 * small
    assert act("rl.tasks.group_size=4", "rl.optim.micro_batch_rows=8") == act("rl.tasks.group_size=8", "rl.optim.micro_batch_rows=8") == 2 * small


def test_the_shared_prompt_counts_once_and_only_sampled_tokens_get_logits(tiny):
    """The trainer forwards a group's prompt once and repeats its KV cache, and turns only sampled
    tokens into logits. So p more prompt tokens add p * L * 34H * 2 bytes (the layer term, once, not
    G times, and no vocabulary term); one more generated token per row adds G * (L * 34H * 2 + 4V): the
    chunked projection keeps only the logits, fp32 at most; 12V on the plain path an entropy bonus takes."""
    opts = ["rl.tasks.group_size=4", "rl.optim.micro_batch_rows=4"]
    E = load_config("recipes/tiny.yaml").rollout.max_episode_tokens
    conf = tiny.config
    layer = conf.num_hidden_layers * 34 * conf.hidden_size * 2
    act = lambda prompt, *o: estimate_rl_bytes(tiny, shape(tiny, *opts, *o), prompt_tokens=prompt)["activations"]  # noqa: E731
    base = act(0)
    assert act(512) - base == 512 * layer
    longer = f"rollout.max_episode_tokens={E + 1}"
    assert act(0, longer) - base == 4 * (layer + 4 * conf.vocab_size)
    bonus = "rl.algorithm.entropy_coef=0.01"  # chunked too: its gradient needs no (N, V) tensor
    assert act(0, bonus, longer) - act(0, bonus) == 4 * (layer + 4 * conf.vocab_size)
    # two groups, two prompts (they share only the system prompt)
    two = "rl.optim.micro_batch_rows=8"
    assert act(512, two) - act(0, two) == 2 * 512 * layer


def test_teachers_add_their_weights_and_logits(tiny):
    """Each OPD teacher holds a frozen copy (4P); their logits over a micro-batch's sampled tokens add
    R*E*4V (the tiny recipe: two groups of 4, R = 8 rows)."""
    P = sum(p.numel() for p in tiny.parameters())
    parts = estimate_rl_bytes(tiny, shape(tiny, "distill.teachers=[a, b]"))
    generated = 8 * load_config("recipes/tiny.yaml").rollout.max_episode_tokens
    assert parts["teachers"] == 8 * P and parts["teacher_logits"] == generated * 4 * tiny.config.vocab_size


def test_too_little_memory_stops_with_the_knobs(tiny):
    run = shape(tiny)
    need = check_memory(tiny, run, 512, available=1e12)["mem_estimate_gb"]
    with pytest.raises(MemoryBudgetError, match="Lower rl.tasks.group_size"):
        check_memory(tiny, run, 512, available=need * GB / 2)
    # model.memory_check false, the user's override: warned by the estimate, tries anyway
    assert check_memory(tiny, run, 512, available=need * GB / 2, enforce=False)["mem_estimate_gb"] == need


def test_checkpointing_keeps_only_layer_inputs_of_the_rows(tiny):
    """With `model.gradient_checkpointing` a row's token costs L * 4H (each layer's fp32 input) + 34H * 2
    (the one layer being recomputed) instead of L * 34H * 2; the shared prompt (one group here) is
    forwarded once, not checkpointed, at the full L * 34H * 2. Without a prompt: activations =
    tokens * layer + generated * 4V, tokens = generated."""
    conf = tiny.config
    L, H, V = conf.num_hidden_layers, conf.hidden_size, conf.vocab_size
    opts = ["rl.tasks.group_size=4", "rl.optim.micro_batch_rows=4", "rollout.max_turns=1"]
    plain = estimate_rl_bytes(tiny, shape(tiny, *opts), 0)["activations"]
    ckpt = lambda p: estimate_rl_bytes(tiny, shape(tiny, *opts, "model.gradient_checkpointing=true"), p)["activations"]  # noqa: E731
    generated = 4 * load_config("recipes/tiny.yaml").rollout.max_episode_tokens
    assert plain == generated * (L * 34 * H * 2 + 4 * V)
    assert ckpt(0) == generated * (L * 4 * H + 34 * H * 2 + 4 * V)
    assert ckpt(10) - ckpt(0) == 10 * L * 34 * H * 2


def test_past_the_kept_logits_the_vocabulary_term_is_one_chunk(tiny):
    """Up to KEEP_LOGITS_BYTES the projection keeps N * 4V bytes of logits; past it the backward
    recomputes them and one chunk's CHUNK * 12V is all it holds, whatever N (a group of 2 rows of
    E tokens: N = 2E)."""
    V = tiny.config.vocab_size
    act = lambda E: estimate_rl_bytes(tiny, shape(tiny, "rl.tasks.group_size=2", "rl.optim.micro_batch_rows=1",  # noqa: E731
                                                  "rollout.max_turns=1", f"rollout.max_episode_tokens={E}"), 0)["activations"]
    layer = tiny.config.num_hidden_layers * 34 * tiny.config.hidden_size * 2
    small = vocab.KEEP_LOGITS_BYTES // (4 * V) // 2
    assert act(small) == 2 * small * (layer + 4 * V)
    assert act(small + 1) == 2 * (small + 1) * layer + vocab.CHUNK * 12 * V
    assert act(4 * small) == 8 * small * layer + vocab.CHUNK * 12 * V


def test_the_sampler_kv_cache_counts_the_episodes_decoding_at_once(tiny):
    """2 (keys, values) x L x H_kv x d x 4 bytes (fp32 here) a token, for every episode decoding at once
    (a step's tasks x G, or rollout.max_concurrent), each at most its prompt + E + O tokens, times KV_SPARE
    for the cache's spare capacity and padding; none when an agent program samples. It is the rollout's memory, not the
    update's: the larger of the two counts, both when rollouts overlap the update (max_staleness > 0)."""
    conf = tiny.config
    per_token = 2 * conf.num_hidden_layers * conf.num_key_value_heads * (conf.hidden_size // conf.num_attention_heads) * 4
    assert kv_bytes_per_token(conf, torch.float32) == per_token
    cfg = load_config("recipes/tiny.yaml")
    row = 100 + cfg.rollout.max_episode_tokens + 48 * (cfg.rollout.max_turns - 1)
    whole = estimate_rl_bytes(tiny, shape(tiny), 100)["sampler_kv"]
    assert whole == cfg.rl.tasks.per_step * cfg.rl.tasks.group_size * row * per_token * KV_SPARE
    assert estimate_rl_bytes(tiny, shape(tiny, "rollout.max_concurrent=2"), 100)["sampler_kv"] == 2 * row * per_token * KV_SPARE
    assert estimate_rl_bytes(tiny, shape(tiny, "rollout.agent.program=x:y"), 100)["sampler_kv"] == 0
    parts = {"weights": 10.0, "activations": 5.0, "sampler_kv": 7.0}
    assert peak_bytes(parts, shape(tiny)) == 17.0 and peak_bytes(parts, shape(tiny, "rl.max_staleness=1")) == 22.0


def _smollm2():
    """SmolLM2-135M's architecture (its config.json), no weights: what the estimate reads."""
    conf = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
                       tie_word_embeddings=True)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(conf)


def test_a_16k_token_episode_of_smollm2_fits_in_24_gib_by_the_plan():
    """SmolLM2-135M, two groups of 16 episodes of 16k generated tokens over 32 turns, full fine-tune,
    bf16: as configured it needs far more than 24 GiB (16 rows of 16k tokens through 30 layers, 300
    GiB); the plan turns on checkpointing (1.9 GiB a row then), bounds micro-batches to the rows that
    fit, and the sampler to one group at a time (the 32 episodes' caches, 25 GiB, do not fit): the
    estimate then fits, and each step was needed."""
    model = _smollm2()
    run = shape(model, "model.precision=bf16", "rl.tasks.group_size=16", "rl.tasks.per_step=2",
                "rollout.max_episode_tokens=16384", "rollout.max_turns=32")
    budget = 24 * GB
    before = peak_bytes(estimate_rl_bytes(model, run, 512), run)
    planned, values = plan_memory(model, run, 512, budget)
    after = peak_bytes(estimate_rl_bytes(model, planned, 512), planned)
    assert before > 2 * budget and after <= budget
    assert values["model.gradient_checkpointing"] is True and planned.gradient_checkpointing
    assert 0 < values["rl.optim.micro_batch_tokens"] < 16 * 16384
    assert values["rollout.max_concurrent"] == 16
    assert check_memory(model, planned, 512, available=budget)["mem_estimate_gb"] <= 24
    # one row alone, checkpointed: its activations and its chunked logits
    one = replace(planned, micro_batch_tokens=512 + 16384 + 48 * 31, decoding=0)
    assert estimate_rl_bytes(model, one, 512)["activations"] < 3 * GB


def test_the_plan_changes_nothing_that_fits_and_stops_at_one_row(tiny):
    """A run that fits is left as it is; one that fits only with checkpointing gets just that; with
    too little memory for even one row the plan ends at one row (and check_memory refuses)."""
    run = shape(tiny)
    need = peak_bytes(estimate_rl_bytes(tiny, run, 512), run)
    assert plan_memory(tiny, run, 512, need) == (run, {})
    assert plan_memory(tiny, run, 512, None) == (run, {})
    ckpt = replace(run, gradient_checkpointing=True)
    assert plan_memory(tiny, run, 512, peak_bytes(estimate_rl_bytes(tiny, ckpt, 512), ckpt))[1] == {
        "model.gradient_checkpointing": True}
    planned, values = plan_memory(tiny, run, 512, 1.0)
    assert values["rollout.max_concurrent"] == 1 and planned.decoding == 1
    assert values["rl.optim.micro_batch_tokens"] == 512 + 48 + 48 * 2  # the prompt and one row
    with pytest.raises(MemoryBudgetError):
        check_memory(tiny, planned, 512, available=1.0)


def test_the_run_takes_the_plan_and_checkpoints_its_model(tokenizer):
    """`fit_memory` (what the RL stage runs first): the planned values in the recipe, checkpointing
    turned on in the model's layers, the plan in the estimate's report; `model.memory_plan: false`,
    or `model.memory_check: false` (a run that must not depend on free memory), leaves the recipe and
    the model as they were."""
    from agentic_rl.models.loader import tiny_model
    from agentic_rl.trainer.rl_loop import fit_memory

    cfg = load_config("recipes/tiny.yaml")
    model = tiny_model(tokenizer)
    ckpt = memory_shape(load_config("recipes/tiny.yaml", ["model.gradient_checkpointing=true"]), model)
    enough = peak_bytes(estimate_rl_bytes(model, ckpt, 100), ckpt)
    off, report = fit_memory(load_config("recipes/tiny.yaml", ["model.memory_plan=false", "model.memory_check=false"]),
                             model, 100, enough)
    assert not off.model.gradient_checkpointing and "mem_plan" not in report
    unchecked, report = fit_memory(load_config("recipes/tiny.yaml", ["model.memory_check=false"]), model, 100, enough)
    assert not unchecked.model.gradient_checkpointing and "mem_plan" not in report  # nothing hangs on free memory
    assert not any(getattr(layer, "gradient_checkpointing", False) for layer in model.model.layers)
    fitted, report = fit_memory(cfg, model, 100, enough)
    assert fitted.model.gradient_checkpointing and report["mem_plan"] == {"model.gradient_checkpointing": True}
    assert all(layer.gradient_checkpointing for layer in model.model.layers)
    assert report["mem_estimate_gb"] <= enough / GB + 1e-3


# A fresh process allocates 256 MiB as 4096 tensors of 64 KiB (below glibc's 128 KiB mmap threshold,
# so from its heap), each followed by a 64-byte tensor that stays: the freed chunks cannot merge
# into the heap's top, which is all that glibc's own trimming gives back. Freed, they stay resident;
# released, the pages inside each chunk go (15 of its 16 whole pages, plus what merges), so at least
# 0.8 x 256 MiB leaves the resident size. Measured: 257.5 MiB free in malloc's heap, all of it
# resident; 235.7 MiB released.
_FRAGMENTED = """
import json, torch
from agentic_rl.models.memory import heap_gb, release_free_memory, rss_gb
big, pins = [], []
for _ in range(4096):
    big.append(torch.ones(16384))
    pins.append(torch.ones(16))
before = rss_gb()
del big
held = rss_gb()
free = heap_gb()["mem_heap_free_gb"]
released = release_free_memory()
print(json.dumps({"before": before, "held": held, "free": free, "after": rss_gb(), "released": released}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_released_memory_leaves_the_resident_size():
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=120).stdout
    m = json.loads(out.splitlines()[-1])
    assert m["released"]
    assert m["free"] * 1024 >= 256  # the freed tensors are malloc's free chunks (with their headers) ...
    assert (m["before"] - m["held"]) * 1024 < 0.2 * 256  # ... still resident
    assert (m["held"] - m["after"]) * 1024 >= 0.8 * 256, m  # released, they leave
