"""A KV cache that grows in place. transformers' DynamicLayer concatenates on every decode step,
copying the whole cache each time (quadratic in length: a fifth of a decode step at batch 32 here).
This layer writes into a buffer with spare capacity and exposes a view; capacity doubles when full.
Inference only: in-place writes would break autograd, so training keeps the stock cache.

A layer can also hold a prefix that every row shares (`GrowableCache.freeze_prefix`): its keys and
values are kept once, outside the rows' buffers, and read by `prefix_attention`.

Two operations keep the rows' own buffers short and their forwards narrow. `repack` moves each row's
real slots to the left and drops the columns that are padding in every row: a wide forward (an
observation fed to a few rows) leaves padding columns in all the others, which every later decode
step would read. `subset(rows)` runs a forward on some rows only: the new columns are written for
those rows (zeros, masked, for the others) and attention reads only their cache rows."""

from __future__ import annotations

from contextlib import contextmanager

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
        rows = getattr(self, "rows", None)
        B = key_states.shape[0] if rows is None else self._k.shape[0]
        need = self._len + key_states.shape[-2]
        if self._k is None or need > self._k.shape[-2] or self._k.shape[0] != B:
            self._grow(B, key_states, value_states, max(need + 64, 2 * need))
        if rows is None:
            self._k[..., self._len : need, :] = key_states
            self._v[..., self._len : need, :] = value_states
        else:  # the other rows' new slots are masked; zeros keep the masked scores finite
            for buf, new in ((self._k, key_states), (self._v, value_states)):
                buf[..., self._len : need, :] = 0
                buf[rows, :, self._len : need] = new
        self._len = need
        self.keys, self.values = self._k[..., :need, :], self._v[..., :need, :]
        if rows is None:
            return self.keys, self.values
        return self.keys[rows], self.values[rows]

    def _grow(self, B: int, key_states, value_states, capacity: int) -> None:
        _, H, _, D = key_states.shape
        k = key_states.new_empty(B, H, capacity, D)
        v = value_states.new_empty(B, value_states.shape[1], capacity, value_states.shape[-1])
        if self._k is not None and self._len:
            k[..., : self._len, :] = self._k[..., : self._len, :]
            v[..., : self._len, :] = self._v[..., : self._len, :]
        self._k, self._v = k, v

    def repack(self, index: torch.Tensor) -> None:
        """Keep, in each row r, the slots index[r] (R, S) in that order, with spare capacity after."""
        if not self._len:
            return
        R, S = index.shape
        bufs = []
        for buf in (self._k, self._v):
            out = buf.new_empty(R, buf.shape[1], S + 64, buf.shape[-1])
            out[..., :S, :] = buf[..., : self._len, :].gather(2, index[:, None, :, None].expand(R, buf.shape[1], S, buf.shape[-1]))
            bufs.append(out)
        self._k, self._v = bufs
        self._len = S
        self.keys, self.values = self._k[..., :S, :], self._v[..., :S, :]

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

    def repack(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.repack(index)

    @contextmanager
    def subset(self, rows: torch.Tensor):
        """Forwards inside run on the rows `rows` only (see the module's docstring)."""
        for layer in self.layers:
            layer.rows = rows
        try:
            yield
        finally:
            for layer in self.layers:
                layer.rows = None

    @property
    def has_prefix(self) -> bool:
        return bool(self.layers) and getattr(self.layers[0], "prefix_k", None) is not None
