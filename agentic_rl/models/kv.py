"""The KV-cache keyword of a transformers forward pass, across the versions we support.

transformers 5.24 renamed the `past_key_values` argument and output field to `cache`; the old name
still works but warns, and goes in 5.40. Our minimum (5.0) knows only the old name. The engine and
the training pass ask here instead of spelling either name.
"""

from __future__ import annotations

import inspect
from functools import cache


@cache
def _accepts_cache(forward_owner: type) -> bool:
    return "cache" in inspect.signature(forward_owner.forward).parameters


def cache_kwarg(model) -> str:
    """The keyword that passes a KV cache into `model(...)` (a PEFT wrapper forwards it as is)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if _accepts_cache(type(base)) else "past_key_values"


def output_cache(out):
    """The KV cache a forward pass returned, under either name."""
    kv = out.get("cache")  # a ModelOutput is a dict of its non-None fields
    return kv if kv is not None else out.get("past_key_values")
