"""Cascade attention over a shared prefix equals plain attention over the concatenated cache.

The invariant: for any padding of the rows' own tokens, any number of new tokens and grouped
query heads, splitting the keys into [shared prefix | row's own] and merging the two softmaxes by
their log-sum-exps gives the attention one softmax over both would give."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agentic_rl.engines import prefix_attention as pa


def _case(B: int, T: int, S: int, P: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, 6, T, 8, generator=gen)  # 6 query heads over 2 key/value heads
    k, v = torch.randn(B, 2, S, 8, generator=gen), torch.randn(B, 2, S, 8, generator=gen)
    pk, pv = torch.randn(1, 2, P, 8, generator=gen), torch.randn(1, 2, P, 8, generator=gen)
    mask = torch.ones(B, 1, T, S, dtype=torch.bool).tril(S - T)  # causal, aligned to the end
    mask[0, ..., : S - T] = False  # row 0 has only padding before its new tokens
    mask[-1, ..., :2] = False  # the last row has two padding slots
    return q, k, v, pk, pv, mask


def _reference(q, k, v, pk, pv, mask):
    B, T, P = q.shape[0], q.shape[2], pk.shape[2]
    keys = torch.cat([pk.expand(B, -1, -1, -1), k], 2).repeat_interleave(3, 1)
    values = torch.cat([pv.expand(B, -1, -1, -1), v], 2).repeat_interleave(3, 1)
    full = torch.cat([torch.ones(B, 1, T, P, dtype=torch.bool), mask], -1)
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=full, scale=0.3).transpose(1, 2)


@pytest.mark.parametrize("blocks", [pa._blocks, pa._blocks_cpu], ids=["products", "cpu-flash"])
@pytest.mark.parametrize("T", [1, 4])
def test_cascade_equals_attention_over_the_concatenated_cache(blocks, T):
    q, k, v, pk, pv, mask = _case(B=3, T=T, S=7, P=5, seed=T)
    got = pa.cascade(q, k, v, pk, pv, mask, 0.3, blocks)
    torch.testing.assert_close(got, _reference(q, k, v, pk, pv, mask), atol=1e-5, rtol=1e-5)


def test_no_mask_means_causal_over_the_new_tokens():
    q, k, v, pk, pv, _ = _case(B=2, T=3, S=6, P=4, seed=9)
    causal = torch.ones(2, 1, 3, 6, dtype=torch.bool).tril(3)
    torch.testing.assert_close(pa.cascade(q, k, v, pk, pv, None, 0.3), _reference(q, k, v, pk, pv, causal))


def test_a_row_whose_own_block_is_all_padding_reads_the_prefix_alone():
    """A padding query slot (or a row with no tokens of its own yet) must not turn into NaN."""
    q, k, v, pk, pv, mask = _case(B=2, T=2, S=4, P=3, seed=1)
    mask[1] = False
    got = pa.cascade(q, k, v, pk, pv, mask, 0.3, pa._blocks_cpu)
    assert torch.isfinite(got).all()
    prefix_only = F.scaled_dot_product_attention(q[1:], pk.repeat_interleave(3, 1), pv.repeat_interleave(3, 1),
                                                 scale=0.3).transpose(1, 2)
    torch.testing.assert_close(got[1:], prefix_only)


def test_the_engine_keeps_the_stock_path_for_attention_that_is_not_plain():
    """A sliding window of 2 tokens is not attention over the whole prefix: the check must say so."""
    from transformers import MistralConfig, MistralForCausalLM

    from agentic_rl.models.kv import cache_kwarg

    config = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, sliding_window=2)
    model = MistralForCausalLM(config).eval()
    assert not pa.reproduces_attention(model, cache_kwarg(model))
    config.sliding_window = None
    model = MistralForCausalLM(config).eval()
    assert pa.reproduces_attention(model, cache_kwarg(model))
