"""Rollout correction: the sampler is not the policy being trained, and the loss says so.

Three policies meet in an update. The behaviour policy mu sampled the tokens (its per-token
logprobs are stored in the trajectory: a bf16 copy of the weights, a served engine, or weights some
versions old). The proximal policy pi_prox is the trainer's own recompute before the update. The
policy being trained pi_theta moves away from pi_prox during the update. PPO's ratio is
pi_theta / pi_prox (its trust region); the gap between pi_prox and mu is corrected by an importance
weight w = pi_prox / mu on the policy-gradient term (the decoupled PPO objective of Hilton et al.
2021 and AReaL; the truncated form of Yao et al. 2025, "Your Efficient RL Framework Secretly Brings
You Off-Policy RL Training", as verl, SkyRL, TRL and slime ship it):

  tis       min(w, C)                        truncated importance sampling (default, C = 2)
  mis       w if 1/C <= w <= C, else 0       masked importance sampling: a token far off is dropped
  geo_mask  1, or 0 for a whole sequence whose geometric-mean weight exp(mean_t log w_t) leaves
            [1 / (1 + b), 1 + b]             (a sequence-level rejection of badly mismatched samples)
  none      1

With a sequence-level policy loss (GSPO), tis and mis act on the sequence's geometric-mean weight,
applied to all its tokens, as the loss's own ratio is a sequence's. The weights are detached and
multiply only the policy-gradient term: the value loss, the KL and entropy terms and distillation
take none (they are not expectations over the sampler's tokens being reweighted to the trainer's).

Shapes: (B, T) tensors, `mask_BT` 1 on sampled tokens; every function is 0 / 1 (identity) off them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from agentic_rl.registry import Registry


@dataclass(frozen=True)
class Correction:
    weights_BT: torch.Tensor  # multiplies the policy-gradient loss per token; 0 drops the token
    clipped_tokens: float  # tokens whose weight was truncated (tis)
    masked_tokens: float  # tokens whose weight became 0 (mis, or every token of a geo_mask-dropped row)
    masked_sequences: float  # rows with all their tokens dropped


Rule = Callable[[torch.Tensor, torch.Tensor, float, float, bool], Correction]
ROLLOUT_CORRECTIONS: Registry[Rule] = Registry("rollout correction")


def _seq_log_w(log_w_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """(B, 1) the mean log-weight over each row's sampled tokens: the log of its geometric mean."""
    return (log_w_BT * mask_BT).sum(1, keepdim=True) / mask_BT.sum(1, keepdim=True).clamp(min=1)


def _level(log_w_BT: torch.Tensor, mask_BT: torch.Tensor, sequence: bool) -> torch.Tensor:
    """The log-weight each token is judged by: its own, or its sequence's geometric mean."""
    return _seq_log_w(log_w_BT, mask_BT).expand_as(log_w_BT) if sequence else log_w_BT


def _dropped_rows(weights_BT: torch.Tensor, mask_BT: torch.Tensor) -> float:
    m = mask_BT.bool()
    has_tokens = m.any(1)
    return float((has_tokens & ~(weights_BT.bool() & m).any(1)).sum())


@ROLLOUT_CORRECTIONS.register("none")
def no_correction(log_w_BT, mask_BT, threshold: float, band: float, sequence: bool) -> Correction:
    return Correction(mask_BT.clone().float(), 0.0, 0.0, 0.0)


@ROLLOUT_CORRECTIONS.register("tis")
def truncated(log_w_BT, mask_BT, threshold: float, band: float, sequence: bool) -> Correction:
    log_w = _level(log_w_BT, mask_BT, sequence)
    m = mask_BT.bool()
    w = torch.where(m, log_w.clamp(max=math.log(threshold)).exp(), torch.zeros(()))
    return Correction(w, float((m & (log_w > math.log(threshold))).sum()), 0.0, 0.0)


@ROLLOUT_CORRECTIONS.register("mis")
def masked(log_w_BT, mask_BT, threshold: float, band: float, sequence: bool) -> Correction:
    log_w = _level(log_w_BT, mask_BT, sequence)
    m = mask_BT.bool()
    keep = m & (log_w.abs() <= math.log(threshold))
    w = torch.where(keep, log_w.exp(), torch.zeros(()))
    return Correction(w, 0.0, float((m & ~keep).sum()), _dropped_rows(w, mask_BT))


@ROLLOUT_CORRECTIONS.register("geo_mask")
def geometric_mask(log_w_BT, mask_BT, threshold: float, band: float, sequence: bool) -> Correction:
    m = mask_BT.bool()
    keep_B1 = _seq_log_w(log_w_BT, mask_BT).abs() <= math.log1p(band)
    w = (m & keep_B1).float()
    return Correction(w, 0.0, float((m & ~keep_B1).sum()), _dropped_rows(w, mask_BT))


def correct(name: str, proximal_BT: torch.Tensor, sampler_BT: torch.Tensor, mask_BT: torch.Tensor,
            threshold: float, band: float, sequence: bool = False) -> Correction:
    """The weights of correction `name` for the log-weights log w = log pi_prox - log mu (detached)."""
    log_w = torch.where(mask_BT.bool(), (proximal_BT - sampler_BT).detach(), torch.zeros(()))
    return ROLLOUT_CORRECTIONS.get(name)(log_w, mask_BT, threshold, band, sequence)


@dataclass(frozen=True)
class Mismatch:
    """How far the sampler is from the trainer, on the sampled tokens: sums and a max, to add up."""

    abs_sum: float  # sum of |log pi_prox - log mu|
    abs_max: float
    kl_sum: float  # sum of w log w - w + 1 (>= 0): its mean estimates KL(pi_prox || mu) from mu's tokens
    tokens: float


def mismatch(proximal_BT: torch.Tensor, sampler_BT: torch.Tensor, mask_BT: torch.Tensor) -> Mismatch:
    m = mask_BT.bool()
    log_w = torch.where(m, (proximal_BT - sampler_BT).detach().double(), torch.zeros((), dtype=torch.float64))
    w = log_w.exp()
    kl = torch.where(m, w * log_w - w + 1, torch.zeros((), dtype=torch.float64))
    return Mismatch(float(log_w.abs().sum()), float(log_w.abs().max()) if m.any() else 0.0, float(kl.sum()),
                    float(m.sum()))
