"""The RL loss, built once from the config as a list of terms whose sum is a micro-batch's loss.

Every term is a `LossTerm`: `(forward outputs, micro-batch, normalizer) -> (loss, stats)`, with a
`TermNeeds` record saying which rows it trains (the sampled groups, or the verified hindsight
corrections) and what the one policy forward of those rows must compute for it (the entropy with
its gradient, the whole distribution, a value head's values, a teacher's route). The terms: the
policy gradient, on-policy distillation, the entropy bonus, the KL to the reference, the critic's
value loss, and hindsight supervision on the corrections. A new term is one such class added to the
list (docs/algorithms/README.md, "Adding a loss term").

Every term on the sampled rows aggregates with the step's global normalizer
(`algorithms/aggregation.py`), so the sum of the micro-batch losses is the loss of the whole
minibatch however it is split; a term on the corrections gets their own token count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, get_args

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

TermRows = Literal["sampled", "corrections"]  # the step's sampled groups | the verified hindsight corrections


@dataclass(frozen=True, kw_only=True)
class TermNeeds:
    """What a loss term reads: the rows it trains, and what their one policy forward must compute
    for it besides the trained tokens' logprobs and (detached) entropy, which every forward has."""

    rows: TermRows = "sampled"
    advantages: bool = False  # its only signal is the advantages: a group whose advantages are all 0 gives it none
    entropy_grad: bool = False  # `out.entropy` with its gradient (the plain vocabulary projection)
    full: bool = False  # `out.full`: the whole distribution at the trained positions
    value_head: torch.nn.Module | None = None  # `out.values`: the hidden states through a critic's head
    teachers: Teachers | PrivilegedTeacher | None = None  # whose logprobs it reads: micro-batches never mix routes

    def __post_init__(self) -> None:
        if self.rows not in get_args(TermRows):
            raise ValueError(f"TermNeeds.rows: {self.rows!r}; known: {', '.join(get_args(TermRows))}")


@dataclass(frozen=True, kw_only=True)
class MicroBatch:
    """One forward pass's rows, with what the terms read besides the forward's outputs. The sampled
    rows carry the PPO ratio's denominator, the correction's weights and their route; hindsight
    corrections have none of these (None)."""

    rows: Sequence[Trajectory]
    batch: Batch  # the rows' tensors; `batch.advantages` aligned with the loss mask
    mask: torch.Tensor  # (B, T) the trained positions (the loss mask, less DAPO's truncated rows)
    proximal: torch.Tensor | None = None  # (B, T) the trainer's logprobs before the update: the PPO ratio's denominator
    weights: torch.Tensor | None = None  # (B, T) the rollout correction's weight on the policy-gradient term
    task: Task | None = None  # routes the teachers (every group of a micro-batch has the same route)
    returns: torch.Tensor | None = None  # (B, T) the critic's targets (GAE)
    old_values: torch.Tensor | None = None  # (B, T) the critic's values when the advantages were computed


class LossTerm(Protocol):
    """One term of the loss: what it needs, and its value and statistics on a micro-batch of the rows
    it trains. `norm` is the aggregation's normalizer (sampled rows) or the corrections' token count."""

    @property
    def needs(self) -> TermNeeds: ...

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]: ...


@dataclass(frozen=True, kw_only=True)
class PolicyTerm:
    """The policy-gradient loss named by rl.algorithm.policy_loss (`algorithms/losses.py`)."""

    loss: Callable
    aggregate: Aggregation
    clip_low: float
    clip_high: float
    dual_clip: float | None = None
    needs: ClassVar[TermNeeds] = TermNeeds(advantages=True)

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        pg = self.loss(LossInputs(logprobs_BT=out.logprobs, old_logprobs_BT=mb.proximal,
                                  advantages_BT=mb.batch.advantages, loss_mask_BT=mb.mask, clip_low=self.clip_low,
                                  clip_high=self.clip_high, dual_clip=self.dual_clip, weights_BT=mb.weights))
        stats = UpdateStats(clip_low=float(pg.metrics["clip_low_tokens"]),
                            clip_high=float(pg.metrics["clip_high_tokens"]))
        return self.aggregate(pg.per_token_loss_BT, mb.mask, norm), stats


@dataclass(frozen=True, kw_only=True)
class DistillTerm:
    """coef x the aggregated reverse KL to the (merged) teacher at the trained positions."""

    teachers: Teachers | PrivilegedTeacher
    loss: Callable
    topk: int
    coef: float
    aggregate: Aggregation
    precision: str
    temperature: float

    @property
    def needs(self) -> TermNeeds:
        return TermNeeds(full=True, teachers=self.teachers)  # the student's whole distribution

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        teacher_NV = self.teachers.logprobs(mb, self.precision, self.temperature)
        sel = mb.batch.loss_mask.bool()
        d = self.loss(out.full, teacher_NV, mb.batch.input_ids[sel], self.topk)
        per_token = torch.zeros(sel.shape, dtype=d.loss_N.dtype, device=sel.device).masked_scatter(sel, d.loss_N)
        kl = float((torch.zeros(sel.shape, device=sel.device).masked_scatter(sel, d.kl_N.float()) * mb.mask).sum())
        return self.coef * self.aggregate(per_token, mb.mask, norm), UpdateStats(opd_kl=kl)


@dataclass(frozen=True, kw_only=True)
class EntropyTerm:
    """The entropy bonus -coef x H (its gradient needs the plain vocabulary projection)."""

    coef: float
    aggregate: Aggregation
    needs: ClassVar[TermNeeds] = TermNeeds(entropy_grad=True)

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        return entropy_bonus(out.entropy, mb.mask, self.coef, self.aggregate, norm), UpdateStats()


@dataclass(frozen=True, kw_only=True)
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
    needs: ClassVar[TermNeeds] = TermNeeds()  # its own forward of the reference

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        with torch.no_grad(), autocast(self.precision, mb.mask.device), reference_context(self.reference):
            ref_lp, _ = token_logprobs(self.reference, mb.batch, self.temperature)
        kl = self.estimator(out.logprobs, ref_lp)
        return self.coef * self.aggregate(kl, mb.mask, norm), UpdateStats(kl=float((kl.detach() * mb.mask).sum()))


@dataclass(frozen=True, kw_only=True)
class ValueTerm:
    """vf_coef x the clipped value loss of PPO's critic, on the same sampled tokens."""

    critic: Critic
    vf_coef: float
    value_clip: float
    aggregate: Aggregation
    precision: str

    @property
    def needs(self) -> TermNeeds:
        """A critic on the policy's own trunk: its head on the policy forward's hidden states."""
        return TermNeeds(value_head=self.critic.head if self.critic.shared else None)

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


@dataclass(frozen=True, kw_only=True)
class HindsightTerm:
    """coef x the token-mean NLL of the verified corrections' actions (on the student's context
    without the hint); its normalizer is the corrections' own token count (every rank's)."""

    coef: float
    needs: ClassVar[TermNeeds] = TermNeeds(rows="corrections")

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        nll = -(out.logprobs * mb.mask).sum() / norm
        return self.coef * nll, UpdateStats(hindsight_nll=float(nll.detach()))


@dataclass(frozen=True, kw_only=True)
class Loss:
    """The terms of the loss, in the order they are summed, and how to normalize and forward."""

    terms: tuple[LossTerm, ...]
    aggregation: Aggregation
    max_len: int  # the per-sequence token budget (Dr. GRPO's constant normalizer)
    mask_truncated: bool
    precision: str
    temperature: float
    correction: CorrectionConfig = CorrectionConfig()  # rl.rollout_correction
    sequence_level: bool = False  # the policy loss's ratio is a sequence's (GSPO)

    def on(self, rows: TermRows) -> tuple[LossTerm, ...]:
        """The terms that train `rows`, in order."""
        return tuple(t for t in self.terms if t.needs.rows == rows)

    @property
    def regularized(self) -> bool:
        """A term on the sampled rows besides the advantages: groups whose advantages are all 0 still train."""
        return any(not t.needs.advantages for t in self.on("sampled"))

    @property
    def teachers(self) -> Teachers | PrivilegedTeacher | None:
        """The teachers a term reads: micro-batches are packed by their route."""
        return next((t.needs.teachers for t in self.terms if t.needs.teachers is not None), None)

    def normalizer(self, rows: Sequence[Trajectory]) -> float:
        return self.aggregation.normalizer([sum(t.loss_mask()) for t in rows], self.max_len)

    def forward_keywords(self, rows: TermRows) -> dict:
        """The keywords of `policy_forward` for a micro-batch of `rows`: what its terms need. The
        sampled rows are scored at the sampling temperature (the PPO ratio's), the corrections at 1
        (an NLL of the model's own distribution, as SFT trains)."""
        needs = [t.needs for t in self.on(rows)]
        heads = [n.value_head for n in needs if n.value_head is not None]
        return {"temperature": self.temperature if rows == "sampled" else 1.0,
                "entropy_grad": any(n.entropy_grad for n in needs), "full": any(n.full for n in needs),
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
    value, in that order, then hindsight on the corrections; `reference` is the KL anchor (None: the
    policy itself, adapters off)."""
    alg, d = cfg.rl.algorithm, cfg.distill
    precision, temperature = cfg.model.precision, cfg.rollout.temperature
    settings = policy_settings(alg)
    aggregate = AGGREGATIONS.get(settings.aggregation)
    terms: list[LossTerm] = []
    if not d.only:  # OPD alone drops the policy-gradient term (rewards are then only logged)
        terms.append(PolicyTerm(loss=POLICY_LOSSES.get(alg.policy_loss), aggregate=aggregate,
                                clip_low=settings.clip_low, clip_high=settings.clip_high,
                                dual_clip=alg.dual_clip or None))
    if teachers is not None:
        terms.append(DistillTerm(teachers=teachers, loss=DISTILL_LOSSES.get(d.loss), topk=d.topk, coef=d.coef,
                                 aggregate=aggregate, precision=precision, temperature=temperature))
    if alg.entropy_coef > 0:
        terms.append(EntropyTerm(coef=alg.entropy_coef, aggregate=aggregate))
    if alg.kl_coef > 0 and KL_MODES.get(alg.kl_mode).in_loss:
        terms.append(KLTerm(reference=reference if reference is not None else policy,
                            estimator=KL_LOSSES.get(alg.kl_estimator), coef=alg.kl_coef, aggregate=aggregate,
                            precision=precision, temperature=temperature))
    if critic is not None:
        terms.append(ValueTerm(critic=critic, vf_coef=cfg.rl.critic.vf_coef, value_clip=cfg.rl.critic.value_clip,
                               aggregate=aggregate, precision=precision))
    if cfg.hindsight.coef > 0:
        terms.append(HindsightTerm(coef=cfg.hindsight.coef))
    return Loss(terms=tuple(terms), aggregation=aggregate, max_len=cfg.rollout.max_episode_tokens,
                mask_truncated=alg.mask_truncated, precision=precision, temperature=temperature,
                correction=cfg.rl.rollout_correction,
                sequence_level=as_policy_loss(POLICY_LOSSES.get(alg.policy_loss)).sequence_level)
