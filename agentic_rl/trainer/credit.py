"""Credit: scored groups -> shaped rewards -> per-token advantages, one tensor per trajectory.

Everything that turns rewards into advantages before the update lives here: the outcome rewards
(plus DAPO's overlong penalty), per-turn rewards, a KL penalty as a dense token reward, and the
estimator named by the recipe. Advantages are aligned with each trajectory's `token_ids()` and are
0 off sampled tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs
from agentic_rl.algorithms.dapo import overlong_penalty
from agentic_rl.algorithms.kl import kl_penalty_rewards
from agentic_rl.engines.precision import autocast
from agentic_rl.models.lora import reference_context
from agentic_rl.trainer.config import Config, RLConfig
from agentic_rl.trainer.forward import make_batch, token_logprobs
from agentic_rl.types import TrajectoryGroup


def outcome_rewards(groups: Sequence[TrajectoryGroup], cfg: Config) -> torch.Tensor:
    """(P, G) outcome rewards, plus DAPO's soft overlong penalty when `rl.overlong_buffer` > 0."""
    rewards_PG = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
    if cfg.rl.overlong_buffer:
        lengths = torch.tensor([[t.num_generated for t in g.trajectories] for g in groups])
        rewards_PG = rewards_PG + overlong_penalty(lengths, cfg.rollout.max_episode_tokens, cfg.rl.overlong_buffer,
                                                   cfg.rl.overlong_factor)
    return rewards_PG


@torch.no_grad()
def kl_token_rewards(ref_model, groups: Sequence[TrajectoryGroup], cfg: Config, pad_id: int) -> list[torch.Tensor]:
    """-kl_coef * KL(behaviour || reference) per sampled token, per trajectory (the reward-penalty form
    of the KL, as in PPO-RLHF). The behaviour logprobs are the sampler's; the reference's come from a
    forward pass of `ref_model` (with LoRA: the policy with adapters disabled)."""
    out = []
    for group in groups:
        batch = make_batch(group.trajectories, pad_id)
        with autocast(cfg.model.precision), reference_context(ref_model):
            ref_lp, _ = token_logprobs(ref_model, batch, cfg.rollout.temperature)
        r = kl_penalty_rewards(batch.old_logprobs, ref_lp, batch.loss_mask, cfg.rl.kl_coef, cfg.rl.kl_estimator)
        p = len(batch.prefix_ids)
        for i, t in enumerate(group.trajectories):
            row = torch.zeros(len(t.token_ids()))
            row[p:] = r[i, : len(row) - p]
            out.append(row)
    return out


def compute_advantages(groups: Sequence[TrajectoryGroup], rl: RLConfig, rewards_PG: torch.Tensor | None = None,
                       token_rewards: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Per-token advantages of every trajectory (group by group), each aligned with its `token_ids()`
    and 0 off sampled tokens. Outcome rewards (default: the groups' own), per-turn rewards where turns
    carry them, and dense token rewards go to the estimator named by `rl.advantage`; groups must have
    equal size."""
    trajs = [t for g in groups for t in g.trajectories]
    lengths = [len(t.token_ids()) for t in trajs]
    B, T, K = len(trajs), max(lengths), max(len(t.turns) for t in trajs)
    mask_BT = torch.zeros(B, T)
    turn_BT = torch.zeros(B, T, dtype=torch.long)
    turn_rewards_BK = torch.zeros(B, K)
    dense_BT = torch.zeros(B, T) if token_rewards is not None else None
    for i, t in enumerate(trajs):
        mask_BT[i, : lengths[i]] = torch.tensor(t.loss_mask(), dtype=torch.float)
        turn_BT[i, : lengths[i]] = torch.tensor([k for k, turn in enumerate(t.turns)
                                                 for _ in range(len(turn.obs_ids) + len(turn.action_ids))])
        turn_rewards_BK[i, : len(t.turns)] = torch.tensor([turn.reward or 0.0 for turn in t.turns])
        if dense_BT is not None:
            dense_BT[i, : lengths[i]] = token_rewards[i]
    if rewards_PG is None:
        rewards_PG = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
    process = bool(turn_rewards_BK.any())
    out = ADVANTAGE_ESTIMATORS.get(rl.advantage)(AdvantageInputs(
        rewards_PG, mask_BT, turn_index_BT=turn_BT if process else None,
        turn_rewards_BK=turn_rewards_BK if process else None, token_rewards_BT=dense_BT, scale=rl.advantage_scale))
    return [out.advantages_BT[i, : lengths[i]] for i in range(B)]
