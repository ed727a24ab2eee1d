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

**Rows of several segments** (SFT packing; an episode whose context started over, `Turn.restart`)
attend within each segment only. No (T, T) mask is built for them: `segment_attention` runs the
attention segment by segment, each a causal row of its own (the products with an (L, L) mask where
that is small, SDPA's causal kernel, which stores no score matrix, otherwise), so its memory grows
with the segments' lengths, never as the row's T^2 (8 rows of 40k tokens would need 51 GB of fp32
mask; `benchmarks/bench_segment_mask.py`).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "agentic_rl_train"
SEGMENTS = "agentic_rl_segments"  # no mask function registered: the model passes no mask to it
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


def segment_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              segment_spans=None, **kwargs):
    """Causal attention within each segment of each row, and none across. query (B, Hq, T, D),
    key/value (B, Hkv, P + T, D): a prefix of P cached tokens every segment reads (P = 0 without a
    cache), then the same T tokens; `segment_spans[b]`: the (start, end) of row b's segments, in
    order, covering the row. Returns (B, T, Hq, D).

    Each segment is a row of its own for `train_attention_forward`: given a causal (L, P + L) mask
    where the products take it or there is a prefix, no mask otherwise (SDPA's causal kernel), so
    nothing of size T x T is made."""
    P = key.shape[2] - query.shape[2]
    if attention_mask is not None or segment_spans is None or P < 0:
        raise ValueError("segment attention: the segments' spans over the row's own keys, and no mask")
    not_plain = [k for k in _NOT_PLAIN if kwargs.get(k) is not None] + ["sinks"] * (getattr(module, "sinks", None) is not None)
    if not_plain:  # a window or a bias would need the mask the model builds for it, which is never built here
        raise ValueError(f"segment attention: plain causal softmax attention only (this layer has {', '.join(not_plain)})")
    rows = []
    for b, spans in enumerate(segment_spans):
        parts = []
        for start, end in spans:
            q = query[b : b + 1, :, start:end]
            k, v = (torch.cat([x[b : b + 1, :, :P], x[b : b + 1, :, P + start : P + end]], dim=2) if P
                    else x[b : b + 1, :, start:end] for x in (key, value))
            L = end - start
            small = L * (P + L) <= EAGER_MAX_PER_HEAD
            causal = torch.ones(L, P + L, dtype=torch.bool, device=q.device).tril(P)[None, None] if small or P else None
            parts.append(train_attention_forward(module, q, k, v, causal, dropout, scaling, **kwargs)[0])
        rows.append(torch.cat(parts, dim=1))
    return torch.cat(rows, dim=0), None


AttentionInterface.register(NAME, train_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)
AttentionInterface.register(SEGMENTS, segment_attention_forward)


@contextmanager
def training_attention(model):
    """Run `model`'s forward passes with `train_attention_forward` where it would use SDPA."""
    with _implementation(model, NAME if model.config._attn_implementation == "sdpa" else None):
        yield


def segment_attention(model):
    """Run `model`'s forward passes with `segment_attention_forward`, whatever it uses otherwise: its
    calls must pass `segment_spans`, and it builds no attention mask for them."""
    return _implementation(model, SEGMENTS)


@contextmanager
def _implementation(model, name: str | None):
    """`model.config`'s attention implementation set to `name` for the duration (None: unchanged)."""
    config = model.config
    before = config._attn_implementation
    if name is not None:
        config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = before
