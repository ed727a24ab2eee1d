"""Credit: scored groups -> shaped rewards -> per-token advantages, one tensor per trajectory.

Everything that turns rewards into advantages before the update lives here: the outcome rewards
(plus DAPO's overlong penalty), per-turn rewards, a KL penalty as a dense token reward, the
critic's values (PPO with GAE), and the estimator named by the recipe. Advantages are aligned with each trajectory's `token_ids()` and are
0 off sampled tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs
from agentic_rl.algorithms.dapo import overlong_penalty
from agentic_rl.algorithms.kl import kl_penalty_rewards
from agentic_rl.engines.precision import autocast
from agentic_rl.models.lora import reference_context
from agentic_rl.trainer.config import Config, RLConfig
from agentic_rl.trainer.forward import make_batch, policy_forward, token_logprobs
from agentic_rl.types import Trajectory, TrajectoryGroup


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
        out += trajectory_rows(r, batch, group)
    return out


@torch.no_grad()
def critic_values(model, critic, groups: Sequence[TrajectoryGroup], cfg: Config, pad_id: int) -> list[torch.Tensor]:
    """The critic's V(s_t) on every sampled token before the update, per trajectory (aligned with
    `token_ids()`, 0 elsewhere): GAE's baseline and the anchor of the clipped value loss."""
    out = []
    for group in groups:
        batch = make_batch(group.trajectories, pad_id)
        with autocast(cfg.model.precision):
            values = (policy_forward(model, batch, cfg.rollout.temperature, value_head=critic.head).values
                      if critic.shared else critic.values(batch))
        out += trajectory_rows(values, batch, group)
    return out


def trajectory_rows(x_BT: torch.Tensor, batch, group: TrajectoryGroup) -> list[torch.Tensor]:
    """The inverse of `batch_layout`: a batch-layout tensor back to one row per trajectory, aligned
    with its `token_ids()` (0 on the prefix the batch shares)."""
    p = len(batch.prefix_ids)
    rows = []
    for i, t in enumerate(group.trajectories):
        row = torch.zeros(len(t.token_ids()))
        row[p:] = x_BT[i, : len(row) - p]
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Credit:
    """Per-trajectory tensors aligned with `token_ids()`, 0 off sampled tokens."""

    advantages: list[torch.Tensor]
    returns: list[torch.Tensor] | None = None  # the critic's targets (GAE)
    values: list[torch.Tensor] | None = None  # the critic's values the advantages were computed with


def compute_credit(groups: Sequence[TrajectoryGroup], rl: RLConfig, rewards_PG: torch.Tensor | None = None,
                   token_rewards: Sequence[torch.Tensor] | None = None,
                   values: Sequence[torch.Tensor] | None = None) -> Credit:
    """Advantages (and, with a critic, returns) of every trajectory, group by group. Outcome rewards
    (default: the groups' own), per-turn rewards where turns carry them, dense token rewards and
    critic values go to the estimator named by `rl.advantage`; groups must have equal size."""
    trajs = [t for g in groups for t in g.trajectories]
    lengths = [len(t.token_ids()) for t in trajs]
    B, T, K = len(trajs), max(lengths), max(len(t.turns) for t in trajs)
    mask_BT = torch.zeros(B, T)
    turn_BT = torch.zeros(B, T, dtype=torch.long)
    turn_rewards_BK = torch.zeros(B, K)
    for i, t in enumerate(trajs):
        mask_BT[i, : lengths[i]] = torch.tensor(t.loss_mask(), dtype=torch.float)
        turn_BT[i, : lengths[i]] = torch.tensor([k for k, turn in enumerate(t.turns)
                                                 for _ in range(len(turn.obs_ids) + len(turn.action_ids))])
        turn_rewards_BK[i, : len(t.turns)] = torch.tensor([turn.reward or 0.0 for turn in t.turns])
    if rewards_PG is None:
        rewards_PG = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
    process = bool(turn_rewards_BK.any())
    out = ADVANTAGE_ESTIMATORS.get(rl.advantage)(AdvantageInputs(
        rewards_PG, mask_BT, turn_index_BT=turn_BT if process else None,
        turn_rewards_BK=turn_rewards_BK if process else None, token_rewards_BT=_padded(token_rewards, B, T),
        values_BT=_padded(values, B, T), scale=rl.advantage_scale, gamma=rl.gamma, lam=rl.lam))
    rows = lambda x: [x[i, : lengths[i]] for i in range(B)]  # noqa: E731
    returns = rows(out.returns_BT) if values is not None and out.returns_BT is not None else None
    return Credit(rows(out.advantages_BT), returns, list(values) if values is not None else None)


def compute_advantages(groups: Sequence[TrajectoryGroup], rl: RLConfig, rewards_PG: torch.Tensor | None = None,
                       token_rewards: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Per-token advantages of every trajectory, without a critic (see `compute_credit`)."""
    return compute_credit(groups, rl, rewards_PG, token_rewards).advantages


def _padded(rows: Sequence[torch.Tensor] | None, B: int, T: int) -> torch.Tensor | None:
    if rows is None:
        return None
    out = torch.zeros(B, T)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def observations_as_actions(group: TrajectoryGroup) -> TrajectoryGroup:
    """The masking ablation: every token after the prompt is trained, tool results included, as if
    the policy had written them (their logprob slot is 0: the update must be on-policy, where the
    ratio's denominator is the current logprob). The prompt stays untrained."""
    def merge(t: Trajectory) -> Trajectory:
        turns = [t.turns[0], *(dataclasses.replace(turn, obs_ids=(), action_ids=turn.obs_ids + turn.action_ids,
                                                   logprobs=(0.0,) * len(turn.obs_ids) + turn.logprobs)
                               for turn in t.turns[1:])]
        return dataclasses.replace(t, turns=tuple(turns))
    return TrajectoryGroup(group.task, tuple(merge(t) for t in group.trajectories))

