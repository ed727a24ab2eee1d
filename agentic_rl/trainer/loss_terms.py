"""The RL loss, built once from the config as a list of terms whose sum is a micro-batch's loss.

Each term is `(forward outputs, micro-batch, normalizer) -> (loss, stats)`: the policy-gradient
term, on-policy distillation, the entropy bonus, the KL to the reference, the critic's value loss.
A term also says what it needs from the single policy forward pass of the micro-batch (the entropy
with its gradient, the whole distribution, a value head). Hindsight supervision is one more term,
applied to the batch of verified corrections instead of the sampled groups.

Every term aggregates with the step's global normalizer (`algorithms/aggregation.py`), so the sum of
the micro-batch losses is the loss of the whole minibatch however it is split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from agentic_rl.algorithms.advantages import PAIRED_AGGREGATION
from agentic_rl.algorithms.aggregation import AGGREGATIONS, Aggregation
from agentic_rl.algorithms.distill import DISTILL_LOSSES
from agentic_rl.algorithms.kl import KL_LOSSES, KL_MODES, entropy_bonus
from agentic_rl.algorithms.losses import POLICY_LOSSES, LossInputs, as_policy_loss
from agentic_rl.algorithms.value import value_loss
from agentic_rl.models.forward import PolicyOutputs, token_logprobs
from agentic_rl.models.lora import reference_context
from agentic_rl.models.precision import autocast
from agentic_rl.trainer.config import AlgorithmConfig, Config, CorrectionConfig
from agentic_rl.trainer.critic import Critic
from agentic_rl.trainer.privileged import PrivilegedTeacher
from agentic_rl.trainer.stats import UpdateStats
from agentic_rl.trainer.teachers import Teachers
from agentic_rl.types import Batch, Task, Trajectory


@dataclass(frozen=True)
class MicroBatch:
    """One forward pass's rows, with what the terms read besides the forward's outputs."""

    rows: Sequence[Trajectory]
    batch: Batch  # the rows' tensors; `batch.advantages` aligned with the loss mask
    mask: torch.Tensor  # (B, T) the trained positions (the loss mask, less DAPO's truncated rows)
    proximal: torch.Tensor  # (B, T) the trainer's logprobs before the update: the PPO ratio's denominator
    weights: torch.Tensor  # (B, T) the rollout correction's weight on the policy-gradient term
    task: Task  # routes the teachers (every group of a micro-batch has the same route)
    returns: torch.Tensor | None = None  # (B, T) the critic's targets (GAE)
    old_values: torch.Tensor | None = None  # (B, T) the critic's values when the advantages were computed


@dataclass(frozen=True)
class PolicyTerm:
    """The policy-gradient loss named by rl.algorithm.policy_loss (`algorithms/losses.py`)."""

    loss: Callable
    aggregate: Aggregation
    clip_low: float
    clip_high: float
    dual_clip: float | None = None

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        pg = self.loss(LossInputs(out.logprobs, mb.proximal, mb.batch.advantages, mb.mask, self.clip_low,
                                  self.clip_high, self.dual_clip, mb.weights))
        stats = UpdateStats(clip_low=float(pg.metrics["clip_low_tokens"]),
                            clip_high=float(pg.metrics["clip_high_tokens"]))
        return self.aggregate(pg.per_token_loss_BT, mb.mask, norm), stats


@dataclass(frozen=True)
class DistillTerm:
    """coef x the aggregated reverse KL to the (merged) teacher at the trained positions."""

    teachers: Teachers | PrivilegedTeacher
    loss: Callable
    topk: int
    coef: float
    aggregate: Aggregation
    precision: str
    temperature: float
    full: bool = field(default=True, init=False)  # needs the student's whole distribution

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        teacher_NV = self.teachers.logprobs(mb, self.precision, self.temperature)
        sel = mb.batch.loss_mask.bool()
        d = self.loss(out.full, teacher_NV, mb.batch.input_ids[sel], self.topk)
        per_token = torch.zeros(sel.shape, dtype=d.loss_N.dtype, device=sel.device).masked_scatter(sel, d.loss_N)
        kl = float((torch.zeros(sel.shape, device=sel.device).masked_scatter(sel, d.kl_N.float()) * mb.mask).sum())
        return self.coef * self.aggregate(per_token, mb.mask, norm), UpdateStats(opd_kl=kl)


@dataclass(frozen=True)
class EntropyTerm:
    """The entropy bonus -coef x H (its gradient needs the plain vocabulary projection)."""

    coef: float
    aggregate: Aggregation
    entropy_grad: bool = field(default=True, init=False)

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        return entropy_bonus(out.entropy, mb.mask, self.coef, self.aggregate, norm), UpdateStats()


@dataclass(frozen=True)
class KLTerm:
    """coef x the aggregated KL estimate to the reference: a frozen copy of the policy as RL started,
    or, with LoRA, the policy with its adapters off. The estimator is a `KL_LOSSES` entry, whose
    gradient descends KL(policy || reference)."""

    reference: torch.nn.Module
    estimator: Callable
    coef: float
    aggregate: Aggregation
    precision: str
    temperature: float

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        with torch.no_grad(), autocast(self.precision, mb.mask.device), reference_context(self.reference):
            ref_lp, _ = token_logprobs(self.reference, mb.batch, self.temperature)
        kl = self.estimator(out.logprobs, ref_lp)
        return self.coef * self.aggregate(kl, mb.mask, norm), UpdateStats(kl=float((kl.detach() * mb.mask).sum()))


@dataclass(frozen=True)
class ValueTerm:
    """vf_coef x the clipped value loss of PPO's critic, on the same sampled tokens."""

    critic: Critic
    vf_coef: float
    value_clip: float
    aggregate: Aggregation
    precision: str

    @property
    def value_head(self):
        """The head the policy's forward evaluates, for a critic on the policy's own trunk."""
        return self.critic.head if self.critic.shared else None

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        if self.critic.shared:
            values = out.values
        else:
            with autocast(self.precision, mb.mask.device):
                values = self.critic.values(mb.batch)
        v = value_loss(values, mb.old_values, mb.returns, mb.mask, self.value_clip)
        vl = self.aggregate(v.per_token_loss_BT, mb.mask, norm)
        stats = UpdateStats(value_loss=float(vl.detach()), value_sq_err=float(v.metrics["value_sq_err_sum"]),
                            value_clip=float(v.metrics["value_clip_tokens"]))
        return self.vf_coef * vl, stats


@dataclass(frozen=True)
class HindsightTerm:
    """coef x the token-mean NLL of the verified corrections' actions (on the student's context
    without the hint); its normalizer is the corrections' own token count (every rank's)."""

    coef: float

    def __call__(self, out: PolicyOutputs, batch: Batch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        nll = -(out.logprobs * batch.loss_mask).sum() / norm
        value = self.coef * nll
        return value, UpdateStats(loss=float(value.detach()), hindsight_nll=float(nll.detach()))


@dataclass(frozen=True)
class Loss:
    """The terms of one micro-batch's loss, in the order they are summed, and how to normalize."""

    terms: tuple
    hindsight: HindsightTerm | None
    aggregation: Aggregation
    max_len: int  # the per-sequence token budget (Dr. GRPO's constant normalizer)
    mask_truncated: bool
    precision: str
    temperature: float
    correction: CorrectionConfig = CorrectionConfig()  # rl.rollout_correction
    sequence_level: bool = False  # the policy loss's ratio is a sequence's (GSPO)

    @property
    def regularized(self) -> bool:
        """A term besides the policy gradient: groups whose advantages are all 0 still train."""
        return any(not isinstance(t, PolicyTerm) for t in self.terms)

    def normalizer(self, rows: Sequence[Trajectory]) -> float:
        return self.aggregation.normalizer([sum(t.loss_mask()) for t in rows], self.max_len)

    def forward_needs(self) -> dict:
        """What the micro-batch's policy forward must compute for these terms."""
        heads = [t.value_head for t in self.terms if isinstance(t, ValueTerm) and t.value_head is not None]
        return {"entropy_grad": any(getattr(t, "entropy_grad", False) for t in self.terms),
                "full": any(getattr(t, "full", False) for t in self.terms),
                "value_head": heads[0] if heads else None}


@dataclass(frozen=True)
class PolicySettings:
    """The policy loss's clip range and the aggregation, as a recipe's null values resolve them."""

    clip_low: float
    clip_high: float
    aggregation: str


def policy_settings(alg: AlgorithmConfig) -> PolicySettings:
    """Each null in the recipe takes the papers' value: the aggregation the advantage estimator pairs
    with (Dr. GRPO's constant normalizer), else the policy loss's; the clip range the policy loss's."""
    paper = as_policy_loss(POLICY_LOSSES.get(alg.policy_loss))
    return PolicySettings(
        alg.clip_low if alg.clip_low is not None else paper.clip_low,
        alg.clip_high if alg.clip_high is not None else paper.clip_high,
        alg.aggregation or PAIRED_AGGREGATION.get(alg.advantage) or paper.aggregation)


def build_loss(cfg: Config, policy, reference=None, critic: Critic | None = None,
               teachers: Teachers | None = None) -> Loss:
    """The loss the recipe asks for: policy gradient (unless OPD alone), distillation, entropy, KL,
    value, in that order; `reference` is the KL anchor (None: the policy itself, adapters off)."""
    alg, d = cfg.rl.algorithm, cfg.distill
    precision, temperature = cfg.model.precision, cfg.rollout.temperature
    settings = policy_settings(alg)
    aggregate = AGGREGATIONS.get(settings.aggregation)
    terms: list = []
    if not d.only:  # OPD alone drops the policy-gradient term (rewards are then only logged)
        terms.append(PolicyTerm(POLICY_LOSSES.get(alg.policy_loss), aggregate, settings.clip_low,
                                settings.clip_high, alg.dual_clip or None))
    if teachers is not None:
        terms.append(DistillTerm(teachers, DISTILL_LOSSES.get(d.loss), d.topk, d.coef, aggregate, precision,
                                 temperature))
    if alg.entropy_coef > 0:
        terms.append(EntropyTerm(alg.entropy_coef, aggregate))
    if alg.kl_coef > 0 and KL_MODES.get(alg.kl_mode).in_loss:
        terms.append(KLTerm(reference if reference is not None else policy, KL_LOSSES.get(alg.kl_estimator),
                            alg.kl_coef, aggregate, precision, temperature))
    if critic is not None:
        terms.append(ValueTerm(critic, cfg.rl.critic.vf_coef, cfg.rl.critic.value_clip, aggregate, precision))
    hindsight = HindsightTerm(cfg.hindsight.coef) if cfg.hindsight.coef > 0 else None
    return Loss(tuple(terms), hindsight, aggregate, cfg.rollout.max_episode_tokens, alg.mask_truncated,
                precision, temperature, cfg.rl.rollout_correction,
                as_policy_loss(POLICY_LOSSES.get(alg.policy_loss)).sequence_level)
