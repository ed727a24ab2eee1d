"""Loss aggregation: a per-token loss (B, T) and its mask -> one scalar, as a named choice.

Each aggregation is `reduce(per_token_BT, mask_BT, norm) -> scalar` plus the `normalizer` that
computes `norm` once for the WHOLE batch (from every sequence's sampled-token count). Because the
normalizer is global and each reduce is a sum over whole rows divided by it, the sum of the
micro-batch losses equals the full-batch loss for any split of the batch into row subsets.

Masked positions are selected away with `torch.where` (not multiplied by 0), so an inf or NaN
there cannot leak into the loss or its gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentic_rl.registry import Registry


@dataclass(frozen=True)
class Aggregation:
    """`agg(per_token_BT, mask_BT, norm)` reduces; `agg.normalizer(seq_token_counts, max_len)` gives norm."""

    reduce: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
    normalizer: Callable[[Sequence[int] | torch.Tensor, int | None], float]

    def __call__(self, per_token_BT: torch.Tensor, mask_BT: torch.Tensor, norm: float) -> torch.Tensor:
        return self.reduce(per_token_BT, mask_BT, norm)


AGGREGATIONS: Registry[Aggregation] = Registry("aggregation")


def _masked(per_token_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    return torch.where(mask_BT.bool(), per_token_BT, torch.zeros((), dtype=per_token_BT.dtype))


def token_mean(per_token_BT: torch.Tensor, mask_BT: torch.Tensor, total_tokens: float) -> torch.Tensor:
    """DAPO token-mean: sum_{i,t} m_it l_it / N_tokens(batch). Every sampled token weighs the same,
    so long sequences weigh more (Yu et al. 2025, DAPO, "token-level policy gradient loss")."""
    return _masked(per_token_BT, mask_BT).sum() / max(float(total_tokens), 1.0)


def seq_mean_token_mean(per_token_BT: torch.Tensor, mask_BT: torch.Tensor, total_seqs: float) -> torch.Tensor:
    """Original GRPO: (1/N_seqs) sum_i (1/|y_i|) sum_t m_it l_it. Each sequence weighs the same."""
    per_seq = _masked(per_token_BT, mask_BT).sum(1) / mask_BT.sum(1).clamp(min=1)
    return per_seq.sum() / max(float(total_seqs), 1.0)


def seq_mean_token_sum_norm(per_token_BT: torch.Tensor, mask_BT: torch.Tensor, norm: float) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025): (1/N_seqs) sum_i (1/L_max) sum_t m_it l_it, with a constant L_max
    (the generation budget) instead of |y_i|, which removes GRPO's length bias. `norm` = N_seqs * L_max."""
    return _masked(per_token_BT, mask_BT).sum() / max(float(norm), 1.0)


def _counts(seq_token_counts: Sequence[int] | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(seq_token_counts, dtype=torch.float64).reshape(-1)


def _tokens_norm(seq_token_counts, max_len=None) -> float:
    return float(_counts(seq_token_counts).sum())


def _seqs_norm(seq_token_counts, max_len=None) -> float:
    return float(_counts(seq_token_counts).numel())


def _seqs_times_max_len(seq_token_counts, max_len=None) -> float:
    if max_len is None or max_len <= 0:
        raise ValueError("seq-mean-token-sum-norm needs max_len, the constant per-sequence token budget")
    return float(_counts(seq_token_counts).numel() * max_len)


AGGREGATIONS.register("token-mean")(Aggregation(token_mean, _tokens_norm))
AGGREGATIONS.register("seq-mean-token-mean")(Aggregation(seq_mean_token_mean, _seqs_norm))
AGGREGATIONS.register("seq-mean-token-sum-norm")(Aggregation(seq_mean_token_sum_norm, _seqs_times_max_len))


def batch_normalizer(name: str, loss_mask_BT: torch.Tensor, max_len: int | None = None) -> float:
    """The normalizer of aggregation `name` for a whole batch given as one (B, T) loss mask."""
    return AGGREGATIONS.get(name).normalizer(loss_mask_BT.sum(1), max_len)
