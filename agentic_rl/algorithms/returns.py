"""Token-level credit over sampled tokens only: reward placement, reward-to-go and GAE.

Multi-turn rows interleave sampled tokens (loss mask 1) with observations, prompt and padding
(mask 0). Every recursion here steps over sampled tokens only: a masked position neither receives
credit nor breaks the chain, so the next *sampled* token's value / return is the bootstrap across a
tool observation (as verl and SkyRL do for multi-turn). Consequence, checked by the tests: inserting
or removing masked columns never changes the result at sampled tokens.

Shapes: B rows, T positions, K turns. `turn_index_BT` is read only where the mask is 1.
"""

from __future__ import annotations

import torch


def last_sampled_position(mask_BT: torch.Tensor) -> torch.Tensor:
    """(B,) index of each row's last sampled token, -1 for a row with none."""
    T = mask_BT.shape[1]
    pos = torch.arange(T).expand_as(mask_BT)
    return torch.where(mask_BT.bool(), pos, -1).max(1).values if T else torch.full(mask_BT.shape[:1], -1)


def turn_end_positions(mask_BT: torch.Tensor, turn_index_BT: torch.Tensor, num_turns: int) -> torch.Tensor:
    """(B, K) position of the last sampled token of turn k in row b; -1 if the turn has none."""
    B, T = mask_BT.shape
    m = mask_BT.bool()
    turn = torch.where(m, turn_index_BT.long(), 0)
    if bool(((turn < 0) | (turn >= num_turns)).any()):
        raise ValueError(f"turn_index on sampled tokens must lie in [0, {num_turns})")
    pos = torch.where(m, torch.arange(T).expand(B, T), -1)
    out = torch.full((B, num_turns), -1, dtype=torch.long)
    return out.scatter_reduce(1, turn, pos, reduce="amax", include_self=True)


def place_at(values_BK: torch.Tensor, positions_BK: torch.Tensor, T: int) -> torch.Tensor:
    """(B, T) tensor holding values_BK[b, k] at column positions_BK[b, k]; entries at -1 dropped."""
    B, K = values_BK.shape
    out = torch.zeros(B, T + 1, dtype=values_BK.dtype)  # column T collects the dropped entries
    idx = torch.where(positions_BK >= 0, positions_BK, T)
    out.scatter_add_(1, idx, torch.where(positions_BK >= 0, values_BK, 0))
    return out[:, :T]


def reward_to_go(rewards_BT: torch.Tensor, mask_BT: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """G_t = sum_{k >= 0} gamma^k r_{t_k} over the sampled tokens t = t_0 < t_1 < ... of the row.

    Discounting counts sampled tokens, not positions (observation tokens are not actions). Rewards
    at masked positions are ignored; G is 0 at masked positions.
    """
    m = mask_BT.bool()
    r = torch.where(m, rewards_BT, torch.zeros((), dtype=rewards_BT.dtype))
    out = torch.zeros_like(r)
    running = torch.zeros(r.shape[0], dtype=r.dtype)
    for t in reversed(range(r.shape[1])):
        running = torch.where(m[:, t], r[:, t] + gamma * running, running)
        out[:, t] = torch.where(m[:, t], running, torch.zeros((), dtype=r.dtype))
    return out


def gae(
    rewards_BT: torch.Tensor, values_BT: torch.Tensor, mask_BT: torch.Tensor, gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized Advantage Estimation (Schulman et al. 2016, "High-Dimensional Continuous Control
    Using Generalized Advantage Estimation"), over sampled tokens only:

        delta_t = r_t + gamma * V_{next(t)} - V_t        next(t) = the next sampled token, V = 0 past the end
        A_t     = delta_t + gamma * lam * A_{next(t)}
        R_t     = A_t + V_t                               (the critic's regression target)

    The episode ends at the row's last sampled token (no bootstrap beyond it). Returns
    (advantages_BT, returns_BT), both 0 at masked positions and detached.
    """
    m = mask_BT.bool()
    zero = torch.zeros((), dtype=values_BT.dtype)
    r = torch.where(m, rewards_BT.detach(), zero)
    v = torch.where(m, values_BT.detach(), zero)
    adv = torch.zeros_like(v)
    next_value = torch.zeros(v.shape[0], dtype=v.dtype)
    running = torch.zeros(v.shape[0], dtype=v.dtype)
    for t in reversed(range(v.shape[1])):
        delta = r[:, t] + gamma * next_value - v[:, t]
        running = torch.where(m[:, t], delta + gamma * lam * running, running)
        next_value = torch.where(m[:, t], v[:, t], next_value)
        adv[:, t] = torch.where(m[:, t], running, zero)
    return adv, torch.where(m, adv + v, zero)


def masked_mean_std(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (population) std of x over the sampled tokens of the whole batch."""
    m = mask_BT.bool()
    n = m.sum().clamp(min=1)
    zero = torch.zeros((), dtype=x_BT.dtype)
    mean = torch.where(m, x_BT, zero).sum() / n
    var = torch.where(m, (x_BT - mean) ** 2, zero).sum() / n
    return mean, var.sqrt()
