"""KL to the reference policy (k1 / k2 / k3 estimators) and the entropy bonus.

A KL estimate per sampled token can be used two ways:
- as a reward penalty: `kl_penalty_rewards(...)` gives detached per-token rewards `-coef * kl_t` to
  pass as `AdvantageInputs.token_rewards_BT` (InstructGPT/PPO and REINFORCE++ style); only the
  estimate's value matters, and any estimator serves;
- as a loss term: `kl_coef * aggregate(KL_LOSSES.get(name)(logp, ref_logp, mask), mask, norm)`
  (GRPO's choice); here the gradient is what counts, and on the policy's own samples the estimators
  differ (g = grad log pi of the sampled token):
      k1: E[g] = 0                                     noise only: refused as a loss
      k2: E[(log pi - log pi_ref) g] = grad KL(pi || pi_ref)    the reverse-KL gradient
      k3: E[(1 - pi_ref / pi) g] = grad KL(pi_ref || pi)       the forward KL's, not the one it names
  so `KL_LOSSES` holds k2, and k3 valued as k3 with k2's gradient (the straight-through form verl
  ships as "k3+"): both descend KL(pi || pi_ref).

All estimates are of KL(pi || pi_ref) from samples of pi (Schulman 2020, "Approximating KL
divergence", http://joschu.net/blog/kl-approx.html), with log r = log pi_ref - log pi per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentic_rl.algorithms.aggregation import Aggregation
from agentic_rl.registry import Registry

KL_ESTIMATORS: Registry = Registry("kl estimator")


def _log_r(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor, mask_BT: torch.Tensor | None) -> torch.Tensor:
    """log(pi_ref / pi), zeroed before any nonlinearity where mask is 0 (so garbage there is inert)."""
    log_r = ref_logprobs_BT - logprobs_BT
    if mask_BT is None:
        return log_r
    return torch.where(mask_BT.bool(), log_r, torch.zeros((), dtype=log_r.dtype))


@KL_ESTIMATORS.register("k1")
def kl_k1(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor, mask_BT: torch.Tensor | None = None) -> torch.Tensor:
    """k1 = log pi - log pi_ref = -log r. Unbiased, high variance, can be negative per token."""
    return -_log_r(logprobs_BT, ref_logprobs_BT, mask_BT)


@KL_ESTIMATORS.register("k2")
def kl_k2(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor, mask_BT: torch.Tensor | None = None) -> torch.Tensor:
    """k2 = (log r)^2 / 2. Biased (exact to second order), low variance, >= 0. As a loss on
    on-policy samples its gradient, E[(log pi - log pi_ref) grad log pi], is the gradient of KL."""
    return 0.5 * _log_r(logprobs_BT, ref_logprobs_BT, mask_BT) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor, mask_BT: torch.Tensor | None = None) -> torch.Tensor:
    """k3 = r - 1 - log r. Unbiased, >= 0, low variance; the GRPO paper's choice (DeepSeekMath). As a
    loss its own gradient is KL(pi_ref || pi)'s (`KL_LOSSES` uses `kl_k3_loss`)."""
    log_r = _log_r(logprobs_BT, ref_logprobs_BT, mask_BT)
    return torch.exp(log_r) - 1 - log_r


# rl.algorithm.kl_estimator with kl_mode: loss. Each entry's gradient on the policy's own samples is,
# in expectation, the gradient of KL(pi || pi_ref); k1's is zero, so k1 is not one.
KL_LOSSES: Registry = Registry("kl loss estimator")
KL_LOSSES.register("k2")(kl_k2)


@KL_LOSSES.register("k3")
def kl_k3_loss(logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor,
               mask_BT: torch.Tensor | None = None) -> torch.Tensor:
    """k3's value with k2's gradient (straight-through): the reported loss is the unbiased, low-variance
    k3 estimate, and what it trains descends KL(pi || pi_ref)."""
    k2 = kl_k2(logprobs_BT, ref_logprobs_BT, mask_BT)
    return k2 + (kl_k3(logprobs_BT, ref_logprobs_BT, mask_BT) - k2).detach()


def kl_penalty_rewards(
    logprobs_BT: torch.Tensor, ref_logprobs_BT: torch.Tensor, mask_BT: torch.Tensor, coef: float,
    estimator: str = "k1",
) -> torch.Tensor:
    """Per-token reward r_t = -coef * kl_t on sampled tokens, 0 elsewhere, detached (a reward carries
    no gradient). k1 is the classic choice here (Ziegler et al. 2019; Ouyang et al. 2022)."""
    kl = KL_ESTIMATORS.get(estimator)(logprobs_BT.detach(), ref_logprobs_BT.detach(), mask_BT)
    return torch.where(mask_BT.bool(), -coef * kl, torch.zeros((), dtype=kl.dtype))


def entropy_bonus(
    entropy_BT: torch.Tensor, mask_BT: torch.Tensor, coef: float, aggregate: Aggregation, norm: float,
) -> torch.Tensor:
    """Loss term -coef * aggregate(H_t) over sampled tokens (Mnih et al. 2016; PPO's c2 * S term).

    `entropy_BT` must carry gradient for the bonus to act: H_t = -sum_v pi(v) log pi(v) of the
    policy's next-token distribution at sampled position t. Adding this term to the loss raises the
    entropy when coef > 0.
    """
    return -coef * aggregate(entropy_BT, mask_BT, norm)


@dataclass(frozen=True)
class KLPlacement:
    """Where the KL to the reference enters: the loss (a term), or the reward (a dense penalty the
    advantages carry, `trainer/credit.py`)."""

    in_loss: bool
    in_reward: bool


# rl.algorithm.kl_mode
KL_MODES: Registry[KLPlacement] = Registry("kl mode")
KL_MODES.register("loss")(KLPlacement(in_loss=True, in_reward=False))
KL_MODES.register("reward")(KLPlacement(in_loss=False, in_reward=True))
