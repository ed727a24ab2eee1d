"""Advantage estimators: outcome rewards of G samples per task -> one advantage per sample.

Uniform signature: `estimator(rewards_PG) -> advantages_PG` for P tasks x G samples. The trainer
broadcasts a sample's advantage onto its sampled tokens only (loss mask 1); masked tokens get 0.
"""

from __future__ import annotations

import torch

from agentic_rl.algorithms.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator")


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards_PG: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (Shao et al. 2024, DeepSeekMath): A_i = (r_i - mean_G r) / (std_G r + eps).

    std is the unbiased sample std (as in the paper's reference code and TRL). A group whose rewards
    are all equal gets advantage 0: it carries no signal.
    """
    mean = rewards_PG.mean(dim=1, keepdim=True)
    std = rewards_PG.std(dim=1, keepdim=True) if rewards_PG.shape[1] > 1 else torch.zeros_like(mean)
    return (rewards_PG - mean) / (std + eps)


@ADVANTAGES.register("dr_grpo")
def dr_grpo_advantages(rewards_PG: torch.Tensor) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): A_i = r_i - mean_G r.
    Dropping the std division removes GRPO's bias toward groups with low reward spread."""
    return rewards_PG - rewards_PG.mean(dim=1, keepdim=True)


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards_PG: torch.Tensor) -> torch.Tensor:
    """RLOO (Ahmadian et al. 2024): baseline = mean of the other G-1 samples.
    A_i = r_i - (sum_G r - r_i)/(G-1) = G/(G-1) * (r_i - mean_G r)."""
    G = rewards_PG.shape[1]
    if G < 2:
        return torch.zeros_like(rewards_PG)
    return (rewards_PG - rewards_PG.mean(dim=1, keepdim=True)) * G / (G - 1)
