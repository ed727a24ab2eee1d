"""A KV cache that grows in place. transformers' DynamicLayer concatenates on every decode step,
copying the whole cache each time (quadratic in length: a fifth of a decode step at batch 32 here).
This layer writes into a buffer with spare capacity and exposes a view; capacity doubles when full.
Inference only: in-place writes would break autograd, so training keeps the stock cache.

A layer can also hold a prefix that every row shares (`GrowableCache.freeze_prefix`): its keys and
values are kept once, outside the rows' buffers, and read by `prefix_attention`."""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


class GrowableLayer(DynamicLayer):
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._k = self._v = None
        self._len = 0
        self.prefix_k = self.prefix_v = None

    def freeze_prefix(self) -> None:
        """Move the cached tokens (batch 1) out of the rows' buffer into the shared prefix."""
        self.prefix_k, self.prefix_v = self.keys, self.values
        self._k = self._v = None
        self._len = 0
        self.keys, self.values = self.prefix_k[..., :0, :], self.prefix_v[..., :0, :]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        need = self._len + new
        if self._k is None or need > self._k.shape[-2] or self._k.shape[0] != key_states.shape[0]:
            self._grow(key_states, value_states, max(need + 64, 2 * need))
        self._k[..., self._len : need, :] = key_states
        self._v[..., self._len : need, :] = value_states
        self._len = need
        self.keys, self.values = self._k[..., :need, :], self._v[..., :need, :]
        return self.keys, self.values

    def _grow(self, key_states, value_states, capacity: int) -> None:
        B, H, _, D = key_states.shape
        k = key_states.new_empty(B, H, capacity, D)
        v = value_states.new_empty(B, value_states.shape[1], capacity, value_states.shape[-1])
        if self._k is not None and self._len:
            k[..., : self._len, :] = self._k[..., : self._len, :]
            v[..., : self._len, :] = self._v[..., : self._len, :]
        self._k, self._v = k, v

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._k = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._v.repeat_interleave(repeats, dim=0)
            self.keys, self.values = self._k[..., : self._len, :], self._v[..., : self._len, :]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[..., : self._len, :], self._v[..., : self._len, :]


class GrowableCache(DynamicCache):
    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowableLayer)

    def freeze_prefix(self) -> None:
        """The tokens cached so far (one row) become the prefix every later row shares."""
        for layer in self.layers:
            layer.freeze_prefix()

    @property
    def has_prefix(self) -> bool:
        return bool(self.layers) and getattr(self.layers[0], "prefix_k", None) is not None
