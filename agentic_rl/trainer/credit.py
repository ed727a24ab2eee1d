"""Credit: scored groups -> shaped rewards -> per-token advantages, one tensor per trajectory.

Everything that turns rewards into advantages before the update lives here: the outcome rewards
(plus DAPO's overlong penalty), per-turn rewards, a KL penalty as a dense token reward, the
critic's values (PPO with GAE), and the estimator named by the recipe. Advantages are aligned with
each trajectory's `token_ids()` and are 0 off sampled tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs
from agentic_rl.algorithms.dapo import overlong_penalty
from agentic_rl.algorithms.kl import KL_MODES, kl_penalty_rewards
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import policy_forward, token_logprobs
from agentic_rl.models.lora import reference_context
from agentic_rl.models.precision import autocast
from agentic_rl.trainer.batching import make_batch, trajectory_rows
from agentic_rl.trainer.config import AlgorithmConfig
from agentic_rl.trainer.critic import Critic
from agentic_rl.types import TrajectoryGroup


@dataclass(frozen=True)
class Credit:
    """Per-trajectory tensors aligned with `token_ids()`, 0 off sampled tokens."""

    advantages: list[torch.Tensor]
    returns: list[torch.Tensor] | None = None  # the critic's targets (GAE)
    values: list[torch.Tensor] | None = None  # the critic's values the advantages were computed with


def with_unadvantaged(every: Sequence[TrajectoryGroup], trained: Sequence[TrajectoryGroup],
                      credit: Credit) -> tuple[list[TrajectoryGroup], Credit]:
    """All of `every`, in its order: the `trained` groups with their credit, the others with zero
    advantage (terms other than the policy gradient, a teacher's, still read them). No critic."""
    advantages = iter(credit.advantages)
    own = {id(g): [next(advantages) for _ in g.trajectories] for g in trained}
    out = [a for g in every for a in own.get(id(g)) or [torch.zeros(len(t.token_ids())) for t in g.trajectories]]
    return list(every), Credit(out)


def outcome_rewards(groups: Sequence[TrajectoryGroup], alg: AlgorithmConfig, max_tokens: int) -> torch.Tensor:
    """(P, G) outcome rewards, plus DAPO's soft overlong penalty when `overlong_buffer` > 0
    (`max_tokens`: the episode's generation budget)."""
    rewards_PG = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
    if alg.overlong_buffer:
        lengths = torch.tensor([[t.num_generated for t in g.trajectories] for g in groups])
        rewards_PG = rewards_PG + overlong_penalty(lengths, max_tokens, alg.overlong_buffer, alg.overlong_factor)
    return rewards_PG


@dataclass(frozen=True)
class Scorer:
    """The forward passes credit needs besides the rewards, and how to run them."""

    policy: torch.nn.Module
    pad_id: int
    precision: str
    temperature: float
    reference: torch.nn.Module | None = None  # the KL anchor; None: the policy, adapters off (LoRA)
    critic: Critic | None = None


@torch.no_grad()
def kl_token_rewards(scorer: Scorer, groups: Sequence[TrajectoryGroup], alg: AlgorithmConfig) -> list[torch.Tensor]:
    """-kl_coef * KL(policy || reference) per sampled token, per trajectory (the reward-penalty form
    of the KL, as in PPO-RLHF). Both logprobs are the trainer's, by forward passes before the update:
    the policy's (not the sampler's, which may be stale, a bf16 copy or a served engine) and the
    reference's (with LoRA: the policy with adapters disabled)."""
    ref = scorer.reference if scorer.reference is not None else scorer.policy
    out = []
    for group in groups:
        batch = make_batch(group.trajectories, scorer.pad_id).to(device_of(ref))
        with autocast(scorer.precision, batch.input_ids.device):
            policy_lp, _ = token_logprobs(scorer.policy, batch, scorer.temperature)
            with reference_context(ref):
                ref_lp, _ = token_logprobs(ref, batch, scorer.temperature)
        r = kl_penalty_rewards(policy_lp, ref_lp, batch.loss_mask, alg.kl_coef, alg.kl_estimator)
        out += trajectory_rows(r, batch, group)
    return out


@torch.no_grad()
def critic_values(scorer: Scorer, groups: Sequence[TrajectoryGroup]) -> list[torch.Tensor]:
    """The critic's V(s_t) on every sampled token before the update, per trajectory (aligned with
    `token_ids()`, 0 elsewhere): GAE's baseline and the anchor of the clipped value loss."""
    critic = scorer.critic
    out = []
    for group in groups:
        batch = make_batch(group.trajectories, scorer.pad_id).to(device_of(scorer.policy))
        with autocast(scorer.precision, batch.input_ids.device):
            values = (policy_forward(scorer.policy, batch, scorer.temperature, value_head=critic.head).values
                      if critic.shared else critic.values(batch))
        out += trajectory_rows(values, batch, group)
    return out


def assign_credit(groups: Sequence[TrajectoryGroup], scorer: Scorer, alg: AlgorithmConfig,
                  max_tokens: int) -> Credit:
    """The step's credit: outcome rewards (with DAPO's overlong penalty), a KL penalty in the reward
    when the recipe puts it there, the critic's values, into the estimator `alg.advantage` names."""
    if not groups:  # dynamic sampling can come back empty-handed: nothing to train on
        return Credit([])
    kl_rewards = (kl_token_rewards(scorer, groups, alg)
                  if alg.kl_coef > 0 and KL_MODES.get(alg.kl_mode).in_reward else None)
    values = critic_values(scorer, groups) if scorer.critic is not None else None
    return compute_credit(groups, alg, outcome_rewards(groups, alg, max_tokens), kl_rewards, values)


def compute_credit(groups: Sequence[TrajectoryGroup], alg: AlgorithmConfig, rewards_PG: torch.Tensor | None = None,
                   token_rewards: Sequence[torch.Tensor] | None = None,
                   values: Sequence[torch.Tensor] | None = None) -> Credit:
    """Advantages (and, with a critic, returns) of every trajectory, group by group. Outcome rewards
    (default: the groups' own), per-turn rewards where turns carry them, dense token rewards and
    critic values go to the estimator named by `alg.advantage`; groups must have equal size. An
    episode the infrastructure failed takes no part in its group's statistics (and trains nothing)."""
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
    exists_PG = torch.tensor([[t.infra_failure is None for t in g.trajectories] for g in groups])
    out = ADVANTAGE_ESTIMATORS.get(alg.advantage)(AdvantageInputs(
        rewards_PG, mask_BT, turn_index_BT=turn_BT if process else None,
        turn_rewards_BK=turn_rewards_BK if process else None, token_rewards_BT=_padded(token_rewards, B, T),
        values_BT=_padded(values, B, T), scale=alg.advantage_scale, gamma=alg.gamma, lam=alg.lam,
        exists_PG=None if bool(exists_PG.all()) else exists_PG))
    rows = lambda x: [x[i, : lengths[i]] for i in range(B)]  # noqa: E731
    returns = rows(out.returns_BT) if values is not None and out.returns_BT is not None else None
    return Credit(rows(out.advantages_BT), returns, list(values) if values is not None else None)


def compute_advantages(groups: Sequence[TrajectoryGroup], alg: AlgorithmConfig, rewards_PG: torch.Tensor | None = None,
                       token_rewards: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Per-token advantages of every trajectory, without a critic (see `compute_credit`)."""
    return compute_credit(groups, alg, rewards_PG, token_rewards).advantages


def _padded(rows: Sequence[torch.Tensor] | None, B: int, T: int) -> torch.Tensor | None:
    if rows is None:
        return None
    out = torch.zeros(B, T)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
