"""Policy losses. Pure functions over (B, T) tensors; masks decide everything.

Uniform signature `POLICY_LOSSES.get(name)(LossInputs) -> LossOutputs`: the per-token loss (B, T) is
0 where loss_mask is 0 and its gradient there is 0; an aggregation (`aggregation.py`) turns it into
a scalar. Inputs at masked positions are selected away before any nonlinearity, so garbage there
(tokens of observations, padding, inf) never reaches the loss or the gradient.

Metrics are detached and micro-batch summable: keys ending in `_tokens` or `_sum` are sums over
sampled tokens; `ratio_max` / `ratio_min` reduce by max / min.

KL estimators and aggregations live in `kl.py` and `aggregation.py`; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from agentic_rl.algorithms.aggregation import AGGREGATIONS, Aggregation, seq_mean_token_mean, token_mean
from agentic_rl.algorithms.kl import KL_ESTIMATORS
from agentic_rl.registry import Registry

__all__ = [
    "AGGREGATIONS", "KL_ESTIMATORS", "POLICY_LOSSES", "Aggregation", "LossInputs", "LossOutputs", "PolicyLoss",
    "as_policy_loss", "cispo_loss", "gspo_loss", "ppo_clip_loss", "seq_mean_token_mean", "token_mean",
]

@dataclass(frozen=True)
class PolicyLoss:
    """A policy loss with the settings of its paper, which a recipe that names none gets: the clip
    range and the aggregation (`rl.algorithm.clip_low` / `clip_high` / `aggregation`)."""

    fn: Callable[[LossInputs], LossOutputs]
    clip_low: float = 0.2
    clip_high: float = 0.2
    aggregation: str = "token-mean"
    sequence_level: bool = False  # its ratio is a sequence's (GSPO): so is the rollout correction's weight

    def __call__(self, x: LossInputs) -> LossOutputs:
        return self.fn(x)


def as_policy_loss(entry) -> PolicyLoss:
    """A registry entry as a PolicyLoss (a plain function, as a plugin may register, gets PPO's)."""
    return entry if isinstance(entry, PolicyLoss) else PolicyLoss(entry)


POLICY_LOSSES: Registry = Registry("policy loss")


@dataclass(frozen=True, kw_only=True)
class LossInputs:
    """One micro-batch. For PPO the clip range is on the token ratio; for GSPO on the sequence ratio;
    for CISPO it bounds the importance weight (each loss's paper values are its `PolicyLoss`'s)."""

    logprobs_BT: torch.Tensor  # current policy, requires grad
    old_logprobs_BT: torch.Tensor  # behaviour policy (detached)
    advantages_BT: torch.Tensor  # per token; 0 where loss_mask is 0
    loss_mask_BT: torch.Tensor  # 1 on sampled tokens
    clip_low: float
    clip_high: float
    dual_clip: float | None = None  # ppo_clip only: the constant c > 1 of dual-clip PPO
    # the rollout correction's per-token weight (`correction.py`), detached; None = 1
    weights_BT: torch.Tensor | None = None


@dataclass(frozen=True)
class LossOutputs:
    per_token_loss_BT: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # sums over masked tokens


def _zero_masked(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    return torch.where(mask_BT.bool(), x_BT, torch.zeros((), dtype=x_BT.dtype))


def _weighted(loss_BT: torch.Tensor, x: LossInputs) -> torch.Tensor:
    """The per-token loss times the rollout correction's weight (a constant: no gradient through it)."""
    return loss_BT if x.weights_BT is None else loss_BT * x.weights_BT.detach()


def _ratio_metrics(ratio_BT, mask_BT, low_BT, high_BT) -> dict[str, torch.Tensor]:
    m = mask_BT.bool()
    r = ratio_BT.detach()
    big = torch.tensor(float("inf"), dtype=r.dtype)
    return {
        "clip_low_tokens": (low_BT & m).sum().to(r.dtype),
        "clip_high_tokens": (high_BT & m).sum().to(r.dtype),
        "tokens": m.sum().to(r.dtype),
        "ratio_sum": torch.where(m, r, 0.0).sum(),
        "ratio_sq_sum": torch.where(m, r * r, 0.0).sum(),
        "ratio_max": torch.where(m, r, -big).max() if r.numel() else -big,
        "ratio_min": torch.where(m, r, big).min() if r.numel() else big,
    }


def ppo_clip_loss(x: LossInputs) -> LossOutputs:
    """PPO clipped surrogate (Schulman et al. 2017), token level, as GRPO uses it:
    loss_t = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t),  rho_t = exp(logp_t - old_t).

    eps_high > eps_low is DAPO's clip-higher (Yu et al. 2025). With `dual_clip = c` (Ye et al. 2020,
    dual-clip PPO) a negative-advantage token's loss is also capped: loss_t = min(loss_t, -c A_t).
    """
    mask = x.loss_mask_BT
    adv = _zero_masked(x.advantages_BT, mask)
    ratio = torch.exp(_zero_masked(x.logprobs_BT - x.old_logprobs_BT, mask))
    clipped = ratio.clamp(1 - x.clip_low, 1 + x.clip_high)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    low = (ratio < 1 - x.clip_low) & (adv < 0)
    high = (ratio > 1 + x.clip_high) & (adv > 0)
    metrics = _ratio_metrics(ratio, mask, low, high)
    if x.dual_clip is not None:
        if x.dual_clip <= 1:
            raise ValueError(f"dual_clip must be > 1, got {x.dual_clip}")
        capped = (adv < 0) & (loss > -x.dual_clip * adv)
        loss = torch.where(capped, -x.dual_clip * adv, loss)
        metrics["clip_dual_tokens"] = (capped & mask.bool()).sum().to(ratio.dtype)
    return LossOutputs(_zero_masked(_weighted(loss, x), mask), metrics)


def gspo_loss(x: LossInputs) -> LossOutputs:
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"), in its GSPO-token form:

        s_i    = exp( (1/|y_i|) sum_{t in y_i} (logp_t - old_t) )        (sampled tokens only)
        s_it   = sg[s_i] * exp(logp_t - sg[logp_t])                       (value s_i, gradient per token)
        loss_t = -min(s_it A_t, clip(s_it, 1 - eps_low, 1 + eps_high) A_t)

    The whole sequence is clipped together. When A_t is constant over a sequence this is exactly
    sequence-level GSPO; the token form keeps per-token credit when A_t varies (process rewards).
    With seq-mean-token-mean aggregation it is the paper's 1/G sum_i 1/|y_i| sum_t objective.
    """
    mask = x.loss_mask_BT
    adv = _zero_masked(x.advantages_BT, mask)
    log_ratio = _zero_masked(x.logprobs_BT - x.old_logprobs_BT, mask)
    seq_log_ratio = log_ratio.sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1)  # (B, 1)
    own = _zero_masked(x.logprobs_BT - x.logprobs_BT.detach(), mask)
    ratio = torch.exp(seq_log_ratio.detach() + own)  # (B, T), every token of row i has value s_i
    clipped = ratio.clamp(1 - x.clip_low, 1 + x.clip_high)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    low = (ratio < 1 - x.clip_low) & (adv < 0)
    high = (ratio > 1 + x.clip_high) & (adv > 0)
    return LossOutputs(_zero_masked(_weighted(loss, x), mask), _ratio_metrics(ratio, mask, low, high))


def cispo_loss(x: LossInputs) -> LossOutputs:
    """CISPO (MiniMax 2025, "MiniMax-M1"): REINFORCE with a clipped, stop-gradient IS weight.

        w_t    = sg[ clip(rho_t, 1 - eps_low, 1 + eps_high) ],  rho_t = exp(logp_t - old_t)
        loss_t = -w_t A_t logp_t

    Unlike PPO no token is ever dropped from the gradient; clipping only bounds its weight. The
    loss value includes logp_t, so it is not comparable in value to ppo_clip's, only in gradient.
    """
    mask = x.loss_mask_BT
    adv = _zero_masked(x.advantages_BT, mask)
    ratio = torch.exp(_zero_masked(x.logprobs_BT - x.old_logprobs_BT, mask)).detach()
    weight = ratio.clamp(1 - x.clip_low, 1 + x.clip_high)
    loss = -weight * adv * _zero_masked(x.logprobs_BT, mask)
    low = ratio < 1 - x.clip_low
    high = ratio > 1 + x.clip_high
    return LossOutputs(_zero_masked(_weighted(loss, x), mask), _ratio_metrics(ratio, mask, low, high))


# Each paper's settings (PPO's clip range with DAPO's token-level mean; GSPO's sequence-ratio range of
# 3e-4 / 4e-4 and its sequence mean; CISPO with no lower bound on its weight (1 - 1 = 0: a ratio is
# positive) and an upper one of 4, the value measured here, where the paper leaves it to tuning).
POLICY_LOSSES.register("ppo_clip")(PolicyLoss(ppo_clip_loss))
POLICY_LOSSES.register("gspo")(PolicyLoss(gspo_loss, clip_low=3e-4, clip_high=4e-4, aggregation="seq-mean-token-mean",
                                          sequence_level=True))
POLICY_LOSSES.register("cispo")(PolicyLoss(cispo_loss, clip_low=1.0, clip_high=4.0))
