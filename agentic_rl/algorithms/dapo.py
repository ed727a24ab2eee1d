"""DAPO's data-side pieces (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System
at Scale"), as pure functions. Its loss-side pieces are elsewhere: clip-higher is `ppo_clip` with
clip_high > clip_low, token-level loss is the "token-mean" aggregation.
"""

from __future__ import annotations

import torch


def dynamic_sampling_keep(rewards_PG: torch.Tensor, tol: float = 0.0) -> torch.Tensor:
    """(P,) bool: keep the groups whose rewards are not all equal (max - min > tol).

    A group with zero reward variance has zero group-relative advantage and only dilutes the batch.
    DAPO drops such groups and keeps sampling until the batch is full again; the sampling loop (not
    this function) decides whether to refill or to train on the smaller batch.
    """
    spread = rewards_PG.max(dim=1).values - rewards_PG.min(dim=1).values
    return spread > tol


def overlong_penalty(lengths_B: torch.Tensor, max_len: int, cache_len: int, factor: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment, added to the outcome reward:

        R_len(y) = 0                              |y| <= L_max - L_cache
                 = ((L_max - L_cache) - |y|) / L_cache    L_max - L_cache < |y| <= L_max
                 = -1                             |y| > L_max

    times `factor`. |y| counts generated (sampled) tokens.
    """
    if not 0 < cache_len <= max_len:
        raise ValueError(f"need 0 < cache_len <= max_len, got {cache_len}, {max_len}")
    expected = max_len - cache_len
    y = lengths_B.to(torch.float32)
    ramp = (expected - y) / cache_len
    penalty = torch.where(y <= expected, torch.zeros(()), torch.where(y <= max_len, ramp, -torch.ones(())))
    return factor * penalty


def mask_truncated(loss_mask_BT: torch.Tensor, truncated_B: torch.Tensor) -> torch.Tensor:
    """DAPO's overlong filtering: a truncated sample's tokens leave the loss (mask 0 on its row).

    Apply it after computing advantages so a truncated sample still counts in its group's baseline.
    """
    return loss_mask_BT * (~truncated_B.bool())[:, None].to(loss_mask_BT.dtype)
