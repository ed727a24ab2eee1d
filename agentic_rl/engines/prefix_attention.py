"""Attention over a prompt prefix that every row shares, stored and read once (cascade attention).

Every episode of a rollout or an evaluation opens with the same system prompt and tool schemas: on
the calculator 288 of a prompt's ~310 tokens, then ~150 tokens of the row's own. Decoding on a CPU
is memory-bound, and with the prefix copied into every row's cache each decode step read those
keys and values once a row: at batch 64, 30 layers × 64 rows of a ~450-token cache, a quarter of
an evaluation's time went to attention. Here the prefix's keys and values are kept once (batch 1)
and each query attends to two blocks: the shared prefix, with every row's queries in one call,
and the row's own tokens. Their log-sum-exps merge the two exactly as one softmax over the
concatenated cache would (tests check it against the full forward).

The model's forward picks this function through transformers' attention registry while the
engine decodes with a prefixed cache (`prefix_attention`); outside that context, or with no
prefix, it is the stock SDPA attention. Models whose attention is not plain softmax attention
(soft-capping, sliding windows, sinks) fail the engine's start-up check and keep the stock path.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from agentic_rl.engines.kv_cache import GrowableCache

NAME = "agentic_rl_prefix"
_CACHE: ContextVar = ContextVar("prefix_cache", default=None)


def prefix_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    cache = _CACHE.get()
    layer = cache.layers[module.layer_idx] if cache is not None else None
    if getattr(layer, "prefix_k", None) is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    blocks = _blocks_cpu if query.device.type == "cpu" else _blocks
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return cascade(query, key, value, layer.prefix_k, layer.prefix_v, attention_mask, scale, blocks), None


def cascade(query, key, value, prefix_k, prefix_v, mask, scale: float, blocks=None) -> torch.Tensor:
    """Attention of `query` over the shared prefix followed by each row's own keys.

    query (B, Hq, T, D); key/value (B, Hkv, S, D), the rows' own tokens; prefix_k/v (1, Hkv, P, D);
    mask (B, 1, T, S) bool (True: attend) or None (no padding). Returns (B, T, Hq, D), the layout of
    transformers' attention functions. Each block is attended on its own, giving an output and the
    log-sum-exp of its scores; the two merge exactly as one softmax over both would."""
    blocks = blocks or _blocks
    B, Hq, T, D = query.shape
    Hkv, S = key.shape[1], key.shape[2]
    g = Hq // Hkv  # query heads per key/value head: head h reads key/value head h // g
    q = query.reshape(B, Hkv, g * T, D)  # the group's queries become rows: no key/value copies
    if mask is None:  # causal within the new tokens, aligned to the end of the rows' cache
        mask = torch.ones(T, S, dtype=torch.bool, device=query.device).tril(S - T)[None, None]
    keep = mask.expand(B, 1, T, S)[:, :, None].expand(B, 1, g, T, S).reshape(B, 1, g * T, S)
    # The prefix block: every row's queries against one copy of the prefix, a single product.
    q_all = q.transpose(0, 1).reshape(1, Hkv, B * g * T, D)
    o_pre, l_pre = blocks(q_all, prefix_k, prefix_v, None, scale)
    o_pre = o_pre.reshape(Hkv, B, g * T, D).transpose(0, 1)
    l_pre = l_pre.reshape(Hkv, B, g * T).transpose(0, 1)
    o_own, l_own = blocks(q, key, value, keep, scale)
    lse = torch.logaddexp(l_pre, l_own)
    # A query whose own block is all padding has l_own = -inf (weight 0) and an undefined output.
    out = o_pre.float() * (l_pre - lse).exp()[..., None] + o_own.float().nan_to_num(0.0) * (l_own - lse).exp()[..., None]
    return out.to(query.dtype).reshape(B, Hq, T, D).transpose(1, 2).contiguous()


def _blocks(q, k, v, keep, scale: float):
    """Softmax attention and the log-sum-exp of its scores, in plain products (any device)."""
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    lse = scores.logsumexp(-1)
    probs = (scores - lse[..., None]).exp().nan_to_num(0.0)
    return torch.matmul(probs.to(v.dtype), v), lse


def _blocks_cpu(q, k, v, keep, scale: float):
    """The same through the CPU's fused flash kernel, which returns the log-sum-exp as well (the
    public SDPA does not): 1.5x faster than the products for one new token, 4x for a chunk of 30."""
    bias = None
    if keep is not None:
        bias = torch.zeros(keep.shape, dtype=q.dtype, device=q.device).masked_fill_(~keep, float("-inf"))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=bias, scale=scale)
    if keep is not None:  # the kernel gives a query with no key to attend to a log-sum-exp of 0, not -inf
        lse = lse.masked_fill(~keep.any(-1), float("-inf"))
    return out, lse


AttentionInterface.register(NAME, prefix_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)


@contextmanager
def prefix_attention(model, cache):
    """Run `model`'s forward passes with attention over `cache`'s shared prefix."""
    config = model.config
    before = config._attn_implementation
    token = _CACHE.set(cache)
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = before
        _CACHE.reset(token)


@torch.no_grad()
def reproduces_attention(model, cache_kw: str) -> bool:
    """Whether `model`'s logits over a shared prefix plus two rows of their own equal its plain
    forward's (to the sampling dtype's rounding): false for attention that is not plain softmax."""
    device, vocab = model.device, model.config.vocab_size
    prefix = (torch.arange(3, 9, device=device) % vocab)[None]
    tails = torch.tensor([[11, 12, 13], [14, 15, 16]], device=device) % vocab
    full = model(input_ids=torch.cat([prefix.expand(2, -1), tails], 1)).logits[:, -1].float()
    cache = GrowableCache()
    model(input_ids=prefix, use_cache=True, **{cache_kw: cache})
    cache.freeze_prefix()
    with prefix_attention(model, cache):
        out = model(input_ids=tails, attention_mask=torch.ones_like(tails),
                    position_ids=torch.arange(6, 9, device=device)[None].expand(2, -1),
                    use_cache=True, **{cache_kw: cache})
    tolerance = 1e-4 if next(model.parameters()).dtype == torch.float32 else 3e-2
    return bool((out.logits[:, -1].float() - full).abs().max() <= tolerance * full.abs().max().clamp(min=1.0))
