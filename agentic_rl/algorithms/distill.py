"""On-policy distillation (OPD): the student samples; teachers score every sampled position.

The objective per trained position t is the reverse KL from the student to the teacher,

    KL_t = sum_v p_s(v | h_t) (log p_s(v | h_t) - log p_t(v | h_t)),

mode-seeking: the student is pushed off tokens the teacher finds unlikely, on the states the student
itself visits (Agarwal et al. 2024, "On-Policy Distillation of Language Models: Learning from
Self-Generated Mistakes" (GKD); Lu & Thinking Machines 2025, "On-Policy Distillation"). Three
estimators of it and the forward KL, one signature (student and teacher log-probabilities (N, V) over
the N trained positions, the sampled ids (N,)) returning a differentiable per-position loss and the
reverse KL it stands for:

- `full`: the exact sum over the vocabulary.
- `topk`: the KL over the teacher's k most likely tokens and one bucket for the rest of the
  vocabulary (each distribution's remaining mass): a true KL, 0 exactly when the student matches
  the teacher there; equals `full` at k = V.
- `sampled`: the one-sample estimate at the sampled token x ~ p_s, log p_s(x) - log p_t(x), with the
  score-function surrogate sg(log p_s(x) - log p_t(x)) * log p_s(x): its gradient, in expectation
  over x ~ p_s, is exactly the gradient of `full` (because E[grad log p_s(x)] = 0), and it needs only
  the teacher's log-probability of the sampled token — the form TRL, prime-rl and SkyRL ship.
- `forward`: the forward KL sum_v p_t(v) (log p_t(v) - log p_s(v)) at the same student-visited
  positions (GKD's on-policy forward KL). Its gradient on the student's logits is p_s - p_t, where
  the reverse KL's is p_s * (log p_s - log p_t - KL): a token the teacher wants but the student
  gives almost no mass gets a push of about its teacher probability instead of about zero. Measured
  on the calculator: after the first tool result the teacher puts 0.68 on the token that starts
  the second call, the student 0.02; the reverse gradient on that logit is -0.09, the forward -0.66.
  Mode-covering rather than mode-seeking; the metric it reports is still the reverse KL.

Several teachers merge into one distribution (DeepSeek-V4's multi-teacher OPD), with weights w_i:
`logits` — a weighted geometric mixture, log_softmax(sum_i w_i log p_i); `probs` — a weighted
arithmetic mixture, log(sum_i w_i p_i). Both give back the teacher when all teachers are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentic_rl.registry import Registry


@dataclass(frozen=True)
class DistillOutputs:
    loss_N: torch.Tensor  # differentiable per-position loss (what the optimizer sees)
    kl_N: torch.Tensor  # detached per-position reverse KL, exact or estimated (what the metrics report)


DistillLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], DistillOutputs]
DISTILL_LOSSES: Registry[DistillLoss] = Registry("distillation loss")


@DISTILL_LOSSES.register("full")
def reverse_kl_full(student_NV: torch.Tensor, teacher_NV: torch.Tensor, sampled_N: torch.Tensor,
                    k: int = 0) -> DistillOutputs:
    kl = (student_NV.exp() * (student_NV - teacher_NV)).sum(-1)
    return DistillOutputs(kl, kl.detach())


@DISTILL_LOSSES.register("topk")
def reverse_kl_topk(student_NV: torch.Tensor, teacher_NV: torch.Tensor, sampled_N: torch.Tensor,
                    k: int = 32) -> DistillOutputs:
    """The reverse KL over k + 1 outcomes: the teacher's k most likely tokens (K) and one bucket for
    the rest of the vocabulary, whose mass is each distribution's remainder:

        KL_K = sum_{v in K} p_s(v) (log p_s(v) - log p_t(v)) + p_s(~K) (log p_s(~K) - log p_t(~K))

    A KL between two distributions, so >= 0, and 0 with zero gradient exactly when the student matches
    the teacher on K and in total tail mass; it never rewards the student for moving mass into the
    tail. K is the teacher's: where the teacher puts its mass is what the student must match."""
    V = student_NV.shape[-1]
    if k >= V:
        return reverse_kl_full(student_NV, teacher_NV, sampled_N)
    top = teacher_NV.detach().topk(k, dim=-1).indices  # (N, k)
    s, t = student_NV.gather(-1, top), teacher_NV.gather(-1, top)
    tail = torch.ones_like(student_NV, dtype=torch.bool).scatter(-1, top, False)
    s_tail = student_NV.masked_fill(~tail, float("-inf")).logsumexp(-1)  # log p_s(~K)
    t_tail = teacher_NV.masked_fill(~tail, float("-inf")).logsumexp(-1)
    kl = (s.exp() * (s - t)).sum(-1) + s_tail.exp() * (s_tail - t_tail)
    return DistillOutputs(kl, kl.detach())


@DISTILL_LOSSES.register("sampled")
def reverse_kl_sampled(student_NV: torch.Tensor, teacher_NV: torch.Tensor, sampled_N: torch.Tensor,
                       k: int = 0) -> DistillOutputs:
    s = student_NV.gather(-1, sampled_N[:, None])[:, 0]
    t = teacher_NV.gather(-1, sampled_N[:, None])[:, 0]
    estimate = (s - t).detach()
    return DistillOutputs(estimate * s, estimate)


@DISTILL_LOSSES.register("forward")
def forward_kl_full(student_NV: torch.Tensor, teacher_NV: torch.Tensor, sampled_N: torch.Tensor,
                    k: int = 0) -> DistillOutputs:
    loss = (teacher_NV.exp() * (teacher_NV - student_NV)).sum(-1)
    # the metric only: off the graph, so no (N, V) intermediates are kept for a backward
    return DistillOutputs(loss, reverse_kl_full(student_NV.detach(), teacher_NV, sampled_N).kl_N)


MERGES: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("teacher merge")


@MERGES.register("logits")
def _geometric(stacked_MNV: torch.Tensor, w_M: torch.Tensor) -> torch.Tensor:
    """log_softmax(sum_i w_i log p_i): a weighted geometric mixture."""
    return torch.log_softmax((w_M[:, None, None] * stacked_MNV).sum(0), dim=-1)


@MERGES.register("probs")
def _arithmetic(stacked_MNV: torch.Tensor, w_M: torch.Tensor) -> torch.Tensor:
    """log(sum_i w_i p_i): a weighted arithmetic mixture."""
    return torch.logsumexp(stacked_MNV + w_M.log()[:, None, None], dim=0)


def merge_teachers(teachers: Sequence[torch.Tensor], weights: Sequence[float], rule: str = "logits") -> torch.Tensor:
    """Log-probabilities (N, V) of the merged teacher, from each teacher's log-probabilities (N, V);
    `rule` names a MERGES entry."""
    if len(teachers) == 1:
        return teachers[0]
    w = torch.tensor(weights, dtype=teachers[0].dtype)
    w = w / w.sum()
    return MERGES.get(rule)(torch.stack(list(teachers)), w)
