"""Policy losses and their aggregation. Pure functions over (B, T) tensors; masks decide everything.

`LossInputs -> LossOutputs`: the loss returns a per-token loss (B, T) that is 0 where loss_mask is 0;
the aggregation turns it into a scalar. Aggregations take global normalizers so a batch split into
micro-batches sums to the same loss as the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from agentic_rl.algorithms.registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss")
KL_ESTIMATORS: Registry = Registry("kl estimator")


@dataclass(frozen=True)
class LossInputs:
    logprobs_BT: torch.Tensor  # current policy, requires grad
    old_logprobs_BT: torch.Tensor  # behaviour policy (detached)
    advantages_BT: torch.Tensor
    loss_mask_BT: torch.Tensor  # 1 on sampled tokens
    clip_low: float = 0.2
    clip_high: float = 0.2


@dataclass(frozen=True)
class LossOutputs:
    per_token_loss_BT: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # sums over masked tokens


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip_loss(x: LossInputs) -> LossOutputs:
    """PPO clipped surrogate (Schulman et al. 2017), token level, as GRPO uses it:
    loss_t = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t),  rho_t = exp(logp_t - old_t).
    With eps_high > eps_low this is DAPO's clip-higher."""
    mask = x.loss_mask_BT
    log_ratio = (x.logprobs_BT - x.old_logprobs_BT) * mask
    ratio = torch.exp(log_ratio)
    clipped = ratio.clamp(1 - x.clip_low, 1 + x.clip_high)
    loss = -torch.minimum(ratio * x.advantages_BT, clipped * x.advantages_BT) * mask
    low = (ratio < 1 - x.clip_low) & (x.advantages_BT < 0)
    high = (ratio > 1 + x.clip_high) & (x.advantages_BT > 0)
    metrics = {
        "clip_low_tokens": (low * mask).sum().detach(),
        "clip_high_tokens": (high * mask).sum().detach(),
        "ratio_sum": (ratio * mask).sum().detach(),
    }
    return LossOutputs(loss, metrics)


@KL_ESTIMATORS.register("k1")
def kl_k1(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor) -> torch.Tensor:
    """k1 = log pi - log pi_ref: unbiased for KL(pi || ref) under samples of pi, high variance."""
    return logprobs_BT - ref_logprobs_BT


@KL_ESTIMATORS.register("k3")
def kl_k3(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor) -> torch.Tensor:
    """k3 (Schulman 2020, "Approximating KL divergence"): r - 1 - log r with r = pi_ref / pi.
    Unbiased, always >= 0, low variance; the GRPO paper's choice."""
    log_r = ref_logprobs_BT - logprobs_BT
    return torch.exp(log_r) - 1 - log_r


def token_mean(per_token_BT: torch.Tensor, mask_BT: torch.Tensor, total_tokens: float) -> torch.Tensor:
    """Sum over masked tokens / tokens in the whole batch (DAPO): every token weighs the same."""
    return (per_token_BT * mask_BT).sum() / max(total_tokens, 1.0)


def seq_mean_token_mean(per_token_BT: torch.Tensor, mask_BT: torch.Tensor, total_seqs: float) -> torch.Tensor:
    """Mean over each sequence's tokens, then over the batch's sequences (the original GRPO)."""
    per_seq = (per_token_BT * mask_BT).sum(1) / mask_BT.sum(1).clamp(min=1)
    return per_seq.sum() / max(total_seqs, 1.0)


AGGREGATIONS = {"token-mean": token_mean, "seq-mean-token-mean": seq_mean_token_mean}
