"""Advantage estimators, in two layers.

`ADVANTAGE_ESTIMATORS` (the uniform API): `estimator(AdvantageInputs) -> AdvantageOutputs`. Inputs
are the outcome rewards of P tasks x G samples, the (B, T) loss mask of the B = P*G rows (row
p*G + g is sample g of task p), and optionally per-turn (process) rewards, dense per-token rewards
(e.g. a KL penalty) and critic values. Output: per-token advantages, 0 wherever the loss mask is 0.

`ADVANTAGES` (outcome kernels): `kernel(rewards_PG) -> advantages_PG`, one scalar per sample. The
group-relative estimators are built from them; they stay callable on their own.

How the optional rewards are credited (our choice, the same for every estimator): a turn's reward
sits on the last sampled token of that turn, dense rewards on their tokens, and a token receives the
reward-to-go over the sampled tokens from itself on (`returns.reward_to_go`, discount `gamma`). So
turn k's reward credits turns 0..k and never a later one; observation tokens take no part. Group
estimators first centre per-turn rewards by the mean turn reward of the task's group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from agentic_rl.algorithms.returns import (
    gae,
    last_sampled_position,
    masked_mean_std,
    place_at,
    reward_to_go,
    turn_end_positions,
)
from agentic_rl.registry import Registry

ADVANTAGES: Registry = Registry("outcome advantage kernel")
ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator")
SCALES: Registry = Registry("advantage scale")

# The aggregation an estimator's paper trains with, where it has one of its own: Dr. GRPO removes the
# length normalization with a constant normalizer. A recipe's rl.algorithm.aggregation overrides it.
PAIRED_AGGREGATION = {"dr_grpo": "seq-mean-token-sum-norm"}


def group_centered(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None = None) -> torch.Tensor:
    """r_i - mean_G r over the entries that exist (all by default; 0 elsewhere), exactly 0 in a
    group whose existing rewards are all equal.

    In floating point the mean of equal rewards is not always that reward: eight rewards of 0.1 in
    float32 average to 0.1 + 7e-9, and GRPO's division by a std of the same size turned that into
    advantages of 0.0074. Such a group then looked as if it had signal, so it was trained (its
    compute wasted) and counted in the token-mean normalizer (diluting the groups with signal).
    """
    exists = torch.ones_like(rewards_PG, dtype=torch.bool) if exists_PG is None else exists_PG.bool()
    e = exists.float()
    mean = (rewards_PG * e).sum(1, keepdim=True) / e.sum(1, keepdim=True).clamp(min=1)
    top = rewards_PG.masked_fill(~exists, -math.inf).amax(1, keepdim=True)
    bottom = rewards_PG.masked_fill(~exists, math.inf).amin(1, keepdim=True)
    return ((rewards_PG - mean) * e).masked_fill(top == bottom, 0.0)


def _count(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None) -> torch.Tensor:
    """(P, 1) how many members of each group exist (G where no mask is given)."""
    if exists_PG is None:
        return torch.full((rewards_PG.shape[0], 1), rewards_PG.shape[1], dtype=rewards_PG.dtype)
    return exists_PG.to(rewards_PG.dtype).sum(1, keepdim=True)


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards_PG: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (Shao et al. 2024, DeepSeekMath): A_i = (r_i - mean_G r) / (std_G r + eps).

    std is the unbiased sample std (as in the paper's reference code and TRL). A group whose rewards
    are all equal gets advantage 0: it carries no signal.
    """
    return group_centered(rewards_PG) / SCALES.get("group")(rewards_PG, None, eps)


@ADVANTAGES.register("dr_grpo")
def dr_grpo_advantages(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None = None) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): A_i = r_i - mean_G r.
    Dropping the std division removes GRPO's bias toward groups with low reward spread."""
    return group_centered(rewards_PG, exists_PG)


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None = None) -> torch.Tensor:
    """RLOO (Ahmadian et al. 2024, "Back to Basics"): baseline = mean of the other G-1 samples.
    A_i = r_i - (sum_G r - r_i)/(G-1) = G/(G-1) * (r_i - mean_G r), G the members that exist."""
    if exists_PG is None:
        G = rewards_PG.shape[1]
        return group_centered(rewards_PG) * G / (G - 1) if G > 1 else torch.zeros_like(rewards_PG)
    n = _count(rewards_PG, exists_PG)
    return group_centered(rewards_PG, exists_PG) * n / (n - 1).clamp(min=1) * (n > 1)


@SCALES.register("group")
def _group_scale(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None, eps: float) -> torch.Tensor:
    """(P, 1) the group's std + eps: the divisor of GRPO's advantages."""
    return _group_std(rewards_PG, exists_PG) + eps


def _group_std(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None = None) -> torch.Tensor:
    """(P, 1) unbiased std within each group, over the members that exist (0 for fewer than 2)."""
    if exists_PG is None:
        if rewards_PG.shape[1] < 2:
            return torch.zeros(rewards_PG.shape[0], 1, dtype=rewards_PG.dtype)
        return rewards_PG.std(dim=1, keepdim=True)
    n = _count(rewards_PG, exists_PG)
    e = torch.ones_like(rewards_PG) if exists_PG is None else exists_PG.to(rewards_PG.dtype)
    mean = (rewards_PG * e).sum(1, keepdim=True) / n.clamp(min=1)
    var = (((rewards_PG - mean) * e) ** 2).sum(1, keepdim=True) / (n - 1).clamp(min=1)
    return torch.where(n > 1, var.sqrt(), torch.zeros(()))


@SCALES.register("batch")
def _batch_scale(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Unbiased std of every reward in the batch that exists, + eps (group mean, batch std: Liu et al.
    2025, "Part I: Tricks or Traps?"); one divisor for all groups keeps their relative weights."""
    r = rewards_PG.reshape(-1) if exists_PG is None else rewards_PG[exists_PG.bool()]
    if r.numel() < 2:
        return torch.full((), eps, dtype=rewards_PG.dtype)
    return r.std() + eps


@SCALES.register("none")
def _no_scale(rewards_PG: torch.Tensor, exists_PG: torch.Tensor | None, eps: float) -> torch.Tensor:
    """1: no division (eps guards a std against 0; it has no business here)."""
    return torch.ones((), dtype=rewards_PG.dtype)


@dataclass(frozen=True)
class AdvantageInputs:
    """Everything an estimator may read. Fields an estimator does not use are ignored."""

    rewards_PG: torch.Tensor  # outcome reward of sample g of task p
    loss_mask_BT: torch.Tensor  # 1 on sampled tokens; B = P*G, row p*G + g
    turn_index_BT: torch.Tensor | None = None  # long: the turn of each sampled token (read where mask 1)
    turn_rewards_BK: torch.Tensor | None = None  # per-turn (process) rewards, 0-padded to K turns
    token_rewards_BT: torch.Tensor | None = None  # dense rewards, e.g. `kl_penalty_rewards` (detached)
    values_BT: torch.Tensor | None = None  # critic V(s_t) before sampling token t (GAE only)
    # bool: the samples that count in their group's statistics (an infrastructure failure does not:
    # its row's loss mask is 0 and its reward takes no part in its group's mean or std); None = all
    exists_PG: torch.Tensor | None = None
    scale: str = "group"  # "grpo" only: divide by the std of the "group", the "batch", or "none"
    gamma: float = 1.0  # discount per sampled token
    lam: float = 1.0  # GAE lambda
    eps: float = 1e-6

    def __post_init__(self) -> None:
        P, G = self.rewards_PG.shape
        if self.loss_mask_BT.shape[0] != P * G:
            raise ValueError(f"loss_mask has {self.loss_mask_BT.shape[0]} rows, rewards are {P}x{G}")
        if self.turn_rewards_BK is not None and self.turn_index_BT is None:
            raise ValueError("turn_rewards_BK needs turn_index_BT to know which tokens a turn owns")

    @property
    def group_size(self) -> int:
        return self.rewards_PG.shape[1]


@dataclass(frozen=True)
class AdvantageOutputs:
    advantages_BT: torch.Tensor  # 0 where loss_mask is 0
    returns_BT: torch.Tensor | None = None  # value targets (GAE) or token returns (REINFORCE++)


def per_row(values_PG: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Broadcast one scalar per sample onto that sample's sampled tokens; 0 elsewhere."""
    rows = values_PG.reshape(-1, 1).to(torch.float32)
    return torch.where(mask_BT.bool(), rows, torch.zeros(()))


def _center_turns(r_BK: torch.Tensor, exists_BK: torch.Tensor, G: int) -> torch.Tensor:
    """Subtract the mean reward of the existing turns of each task's group (exactly 0 when they are
    all equal, as for outcome rewards)."""
    B, K = r_BK.shape
    return group_centered(r_BK.reshape(-1, G * K), exists_BK.reshape(-1, G * K)).reshape(B, K)


def dense_rewards(x: AdvantageInputs, center_turns: bool) -> torch.Tensor | None:
    """(B, T) per-turn rewards on each turn's last sampled token plus the dense token rewards."""
    mask = x.loss_mask_BT
    out = None
    if x.turn_rewards_BK is not None:
        r_BK = x.turn_rewards_BK.to(torch.float32)
        pos_BK = turn_end_positions(mask, x.turn_index_BT, r_BK.shape[1])
        r_BK = torch.where(pos_BK >= 0, r_BK, torch.zeros(()))
        if center_turns:
            r_BK = _center_turns(r_BK, pos_BK >= 0, x.group_size)
        out = place_at(r_BK, pos_BK, mask.shape[1])
    if x.token_rewards_BT is not None:
        tok = torch.where(mask.bool(), x.token_rewards_BT.to(torch.float32), torch.zeros(()))
        out = tok if out is None else out + tok
    return out


def outcome_at_end(x: AdvantageInputs) -> torch.Tensor:
    """(B, T) each row's outcome reward on its last sampled token."""
    pos = last_sampled_position(x.loss_mask_BT)[:, None]
    return place_at(x.rewards_PG.reshape(-1, 1).to(torch.float32), pos, x.loss_mask_BT.shape[1])


def _group_relative(x: AdvantageInputs, adv_PG: torch.Tensor) -> AdvantageOutputs:
    """Outcome advantage on every sampled token + reward-to-go of the centred process rewards."""
    adv = per_row(adv_PG, x.loss_mask_BT)
    dense = dense_rewards(x, center_turns=True)
    if dense is not None:
        adv = adv + reward_to_go(dense, x.loss_mask_BT, x.gamma)
    return AdvantageOutputs(adv)


@ADVANTAGE_ESTIMATORS.register("grpo")
def grpo(x: AdvantageInputs) -> AdvantageOutputs:
    """GRPO: A_i = (r_i - mean_G r) / (s + eps), s = std of the group, of the batch, or 1 (`x.scale`)."""
    r = x.rewards_PG.to(torch.float32)
    return _group_relative(x, group_centered(r, x.exists_PG) / SCALES.get(x.scale)(r, x.exists_PG, x.eps))


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def dr_grpo(x: AdvantageInputs) -> AdvantageOutputs:
    """Dr. GRPO: A_i = r_i - mean_G r (GRPO with scale "none", whatever `x.scale` says)."""
    return _group_relative(x, dr_grpo_advantages(x.rewards_PG.to(torch.float32), x.exists_PG))


@ADVANTAGE_ESTIMATORS.register("rloo")
def rloo(x: AdvantageInputs) -> AdvantageOutputs:
    """RLOO: A_i = r_i - mean_{j != i} r_j."""
    return _group_relative(x, rloo_advantages(x.rewards_PG.to(torch.float32), x.exists_PG))


@ADVANTAGE_ESTIMATORS.register("reinforce_pp")
def reinforce_pp(x: AdvantageInputs) -> AdvantageOutputs:
    """REINFORCE++ (Hu 2025, "REINFORCE++: a simple and efficient approach for aligning LLMs"):

        R_t = sum_{k >= t} gamma^(k-t) r_k     (outcome on the last sampled token + dense rewards)
        A_t = (R_t - mean(R)) / (std(R) + eps)  mean and std over every sampled token of the batch

    No critic and no group baseline: the global normalization is the only baseline.
    """
    rewards = outcome_at_end(x)
    dense = dense_rewards(x, center_turns=False)
    if dense is not None:
        rewards = rewards + dense
    ret = reward_to_go(rewards, x.loss_mask_BT, x.gamma)
    mean, std = masked_mean_std(ret, x.loss_mask_BT)
    adv = torch.where(x.loss_mask_BT.bool(), (ret - mean) / (std + x.eps), torch.zeros(()))
    return AdvantageOutputs(adv, ret)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline(x: AdvantageInputs) -> AdvantageOutputs:
    """REINFORCE++-baseline (Hu 2025): group-mean baseline, then global normalization.

        A'_t = (r_i - mean_G r) + reward-to-go of the centred process rewards
        A_t  = A'_t / (std(A') + eps)            std over every sampled token of the batch

    Our choice: no second centring by the batch token mean. The group baseline already centres each
    group, and subtracting a length-weighted token mean would give a group with equal rewards a
    non-zero advantage.
    """
    adv = _group_relative(x, dr_grpo_advantages(x.rewards_PG.to(torch.float32), x.exists_PG)).advantages_BT
    _, std = masked_mean_std(adv, x.loss_mask_BT)
    return AdvantageOutputs(adv / (std + x.eps))


@ADVANTAGE_ESTIMATORS.register("gae")
def gae_estimator(x: AdvantageInputs) -> AdvantageOutputs:
    """PPO's GAE (`returns.gae`) with a critic: token rewards = outcome on the row's last sampled
    token + per-turn rewards on each turn's last sampled token + dense rewards (e.g. a KL penalty).

    Advantages are whitened (mean 0, std 1 over the batch's sampled tokens, as in PPO's reference
    code); returns are not, they are the critic's targets.
    """
    if x.values_BT is None:
        raise ValueError("the gae estimator needs values_BT from a critic")
    rewards = outcome_at_end(x)
    dense = dense_rewards(x, center_turns=False)
    if dense is not None:
        rewards = rewards + dense
    adv, ret = gae(rewards, x.values_BT.to(torch.float32), x.loss_mask_BT, x.gamma, x.lam)
    mean, std = masked_mean_std(adv, x.loss_mask_BT)
    adv = torch.where(x.loss_mask_BT.bool(), (adv - mean) / (std + x.eps), torch.zeros(()))
    return AdvantageOutputs(adv, ret)
