"""Attention for the trainer's forward passes: plain products where the score matrix is small.

A GRPO micro-batch is a few rows of ~20-250 tokens of their own read against a few hundred keys (the
shared prompt's cache, then their own). At those sizes the CPU's fused SDPA kernel is slow in the
backward pass: on the calculator recipe's update (bf16, two threads) attention was a quarter of the
time, its backward 18%. The same attention as two products and a softmax takes 1.3-2.4x less for
queries of 40-150 tokens, while for long sequences (1,024 against 1,024) the fused kernel is 2x
faster and stores no score matrix. So a forward takes the products when its scores are small
(`EAGER_MAX_SCORES` in all, at most `EAGER_MAX_PER_HEAD` per row and head) and SDPA otherwise
(`benchmarks/bench_train_step.py`, docs/results.md#one-grpo-update).

Only plain masked softmax attention takes the products; anything else a model asks of its attention
(soft-capping, sliding windows, position biases, sinks, dropout, no mask at all) goes to SDPA as before.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "agentic_rl_train"
EAGER_MAX_SCORES = 1 << 23  # ~50 MB of fp32 + bf16 scores a layer kept for the backward pass
EAGER_MAX_PER_HEAD = 1 << 18  # 512 x 512: past ~600 x 600 the fused kernel is as fast or faster
_NOT_PLAIN = ("softcap", "sliding_window", "position_bias", "s_aux")


def train_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    B, Hq, T, _ = query.shape
    S = key.shape[2]
    plain = (attention_mask is not None and not dropout and getattr(module, "sinks", None) is None
             and all(kwargs.get(k) is None for k in _NOT_PLAIN))
    if not plain or T * S > EAGER_MAX_PER_HEAD or B * Hq * T * S > EAGER_MAX_SCORES:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    return products(query, key, value, attention_mask, scaling), None


def products(query, key, value, mask, scaling: float | None = None) -> torch.Tensor:
    """Softmax attention as two products. query (B, Hq, T, D); key/value (B, Hkv, S, D); mask
    (B or 1, 1, T, S), bool (True: attend) or additive. Returns (B, T, Hq, D), the layout of
    transformers' attention functions. The softmax runs in fp32.

    Every op on a score-sized tensor is a pass over (B, Hq, T, S) forward and another backward, so
    the scale goes on the query (D wide, and 1/8 for D = 64 is exact in bf16) and the mask is written
    in place into the fp32 copy the softmax needs anyway."""
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    scores = torch.matmul(query * scale, key.transpose(-1, -2)).float()
    if mask.dtype == torch.bool:
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    else:
        scores.add_(mask)
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    return torch.matmul(probs, value).transpose(1, 2).contiguous()


AttentionInterface.register(NAME, train_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)


@contextmanager
def training_attention(model):
    """Run `model`'s forward passes with `train_attention_forward` where it would use SDPA."""
    config = model.config
    before = config._attn_implementation
    if before == "sdpa":
        config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = before
