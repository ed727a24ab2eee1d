"""The KV-cache keyword follows the installed transformers, so no forward pass warns about it."""

import warnings

import torch
from torch import nn

from agentic_rl.models.kv import cache_kwarg, output_cache


class _OldStyle(nn.Module):
    """A model whose forward knows only the pre-5.24 name."""

    def forward(self, input_ids=None, past_key_values=None, use_cache=None):
        return {"past_key_values": past_key_values}


def test_old_style_forward_gets_the_old_keyword():
    assert cache_kwarg(_OldStyle()) == "past_key_values"
    assert output_cache({"past_key_values": "kv"}) == "kv"


def test_cached_forward_on_the_installed_transformers_does_not_warn(tiny):
    # The invariant: a prefill then a one-token step through the cache, the way the engine and the
    # shared-prompt training pass call it, raises no deprecation warning (5.24+ renamed the
    # keyword and removes the old one in 5.40), and the step's logits match a cache-free pass.
    ids = torch.tensor([[1, 5, 9, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = tiny(input_ids=ids[:, :3], use_cache=True)
        kv = output_cache(first)
        assert kv is not None
        step = tiny(input_ids=ids[:, 3:], use_cache=True, **{cache_kwarg(tiny): kv})
    full = tiny(input_ids=ids, use_cache=False)
    torch.testing.assert_close(step.logits[:, -1], full.logits[:, -1], atol=1e-5, rtol=1e-4)
