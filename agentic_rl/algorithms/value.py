"""PPO's critic: a value head on the policy's hidden states and the clipped value loss.

Alignment: `values_BT[:, t]` is V(s_t), the value of the state just before token t is sampled, i.e.
computed from the same hidden state that predicts token t (`models/forward.py`'s `hidden[:, t]`).
The critic, like the policy, learns only on sampled tokens.
"""

from __future__ import annotations

import torch
from torch import nn

from agentic_rl.algorithms.losses import LossOutputs


class ValueHead(nn.Module):
    """V(s_t) = w . h_t + b. Zero-initialised, so a fresh critic predicts 0 everywhere and the first
    GAE advantages are plain reward-to-go (no random bias from an untrained head)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden_BTH: torch.Tensor) -> torch.Tensor:
        return self.proj(hidden_BTH.to(self.proj.weight.dtype)).squeeze(-1)


def value_loss(
    values_BT: torch.Tensor, old_values_BT: torch.Tensor, returns_BT: torch.Tensor, mask_BT: torch.Tensor,
    clip_eps: float | None = 0.2,
) -> LossOutputs:
    """Clipped value loss (PPO's reference implementation; Schulman et al. 2017 use the unclipped one):

        V_clip = old_V + clip(V - old_V, -eps, eps)
        loss_t = 1/2 max((V_t - R_t)^2, (V_clip_t - R_t)^2)      on sampled tokens, 0 elsewhere

    `clip_eps=None` gives the plain squared error. Aggregate with any `AGGREGATIONS` entry.
    Metrics (sums over sampled tokens): value_clip_tokens (the clipped branch was larger), value_sq_err_sum.
    """
    m = mask_BT.bool()
    zero = torch.zeros((), dtype=values_BT.dtype)
    v = torch.where(m, values_BT, zero)
    old = torch.where(m, old_values_BT.detach(), zero)
    ret = torch.where(m, returns_BT.detach(), zero)
    err = (v - ret) ** 2
    if clip_eps is None:
        loss, clipped = 0.5 * err, torch.zeros_like(m)
    else:
        v_clip = old + (v - old).clamp(-clip_eps, clip_eps)
        err_clip = (v_clip - ret) ** 2
        loss, clipped = 0.5 * torch.maximum(err, err_clip), err_clip > err
    metrics = {
        "value_clip_tokens": (clipped & m).sum().to(v.dtype).detach(),
        "value_sq_err_sum": torch.where(m, err, zero).sum().detach(),
    }
    return LossOutputs(torch.where(m, loss, zero), metrics)
