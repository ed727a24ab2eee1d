"""The next-token logits of each row's last position, computed by slices of the vocabulary.

A decode step needs the logits of one position a row, (rows × hidden) @ (hidden × vocab). With
SmolLM2's 49,152-token vocabulary that weight is 113 MB in fp32, and one product over all of it ran
at 40-70 GFLOPS here against 100-130 for the layers' products: it does not stay in cache. Slices
of 2,048 vocabulary rows do: the product took 24 ms instead of 45 at 32 rows, 39 instead of 54 at
64 (AMD EPYC, 2 threads). So the engine runs the model's decoder and applies the head itself.

Only for heads that are a plain linear map of the last hidden state: a start-up check compares
the result with the model's own forward, and models that scale or cap their logits keep it.
"""

from __future__ import annotations

import torch

SLICE = 2048


class LastLogits:
    def __init__(self, model):
        self.model = model
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.split = (isinstance(head, torch.nn.Linear) and head.bias is None and hasattr(model, "get_decoder")
                      and self._matches())

    def __call__(self, **inputs):
        """(logits of each row's last position (R, V) in fp32, the model's output without logits)."""
        if not self.split:
            out = self.model(logits_to_keep=1, **inputs)
            return out.logits[:, -1, :].float(), out
        out = self.model.get_decoder()(**inputs)
        return self._logits(out.last_hidden_state[:, -1, :]), out

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.model.get_output_embeddings().weight
        out = hidden.new_empty(hidden.shape[0], weight.shape[0])
        for start in range(0, weight.shape[0], SLICE):
            torch.matmul(hidden, weight[start : start + SLICE].t(), out=out[:, start : start + SLICE])
        return out.float()

    @torch.no_grad()
    def _matches(self) -> bool:
        ids = (torch.arange(3, 9, device=self.model.device) % self.model.config.vocab_size)[None]
        want = self.model(input_ids=ids).logits[:, -1].float()
        got = self._logits(self.model.get_decoder()(input_ids=ids).last_hidden_state[:, -1])
        return bool((got - want).abs().max() <= 1e-3 * want.abs().max().clamp(min=1.0))
