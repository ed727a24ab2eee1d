"""The RL update: scored groups + advantages -> per-token loss -> optimizer steps.

The groups of one rollout are split into `rl.minibatches` minibatches, each one optimizer step, for
`rl.epochs` passes (PPO's minibatch epochs: more learning per sampled token). Within a minibatch a
micro-batch is one group (its rows share the prompt, forwarded once), or several small groups up to
`rl.micro_batch_rows` rows (they share the system prompt and tool schemas; one wide forward costs
less than many narrow ones); losses use the minibatch's global normalizer, so the gradient equals
the whole minibatch's gradient however it is split.

Groups whose advantages are all zero (GRPO on equal rewards) carry no policy-gradient signal.
Without a KL, entropy or value term they are dropped before the split (DAPO's dynamic-sampling
filter), so every minibatch has signal. With a critic (PPO + GAE) the value head is trained in the
same backward pass on the same sampled tokens (`rl.vf_coef` x clipped value loss).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.dapo import mask_truncated
from agentic_rl.algorithms.distill import DISTILL_LOSSES
from agentic_rl.algorithms.kl import entropy_bonus
from agentic_rl.algorithms.losses import KL_ESTIMATORS, POLICY_LOSSES, LossInputs
from agentic_rl.algorithms.value import value_loss
from agentic_rl.engines.precision import autocast
from agentic_rl.models.lora import reference_context
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.critic import Critic
from agentic_rl.trainer.forward import (
    SharedPrompt,
    batch_layout,
    common_prefix_len,
    make_batch,
    policy_forward,
    shared_prompt,
    token_logprobs,
)
from agentic_rl.types import Trajectory, TrajectoryGroup

_SUMS = ("nonfinite_minibatches", "opd_kl", "hindsight_nll", "loss", "entropy", "kl", "clip_low", "clip_high", "tokens", "engine_lp_diff", "ratio", "ratio_max", "value_loss", "value_sq_err",
         "value_clip")


def split_minibatches(n: int, k: int) -> list[range]:
    """`n` groups into min(k, n) contiguous minibatches whose sizes differ by at most one."""
    k = max(1, min(k, n))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


@dataclass(frozen=True)
class CriticTargets:
    """PPO's critic for one update (`trainer/critic.py`) and, per trajectory (aligned with
    `token_ids()`), the GAE returns it regresses on and the values it had when the advantages were
    computed."""

    critic: Critic
    returns: Sequence[torch.Tensor]
    values: Sequence[torch.Tensor]


def rl_update(
    model, optimizer, groups: Sequence[TrajectoryGroup], advantages: Sequence[torch.Tensor], cfg: Config,
    pad_id: int, ref_model=None, critic: CriticTargets | None = None, teachers=None,
    corrections: Sequence[Trajectory] = (),
) -> dict[str, float]:
    """`rl.epochs` passes of `rl.minibatches` optimizer steps over the groups, with per-trajectory
    advantages from `trainer/credit.py` (and the critic's targets for PPO with GAE). Hindsight
    `corrections` join the first optimizer step as SFT targets weighted by `hindsight.coef` (a step
    of their own when no group has signal)."""
    start = time.perf_counter()
    rl = cfg.rl
    G = len(groups[0].trajectories) if groups else 0
    per_group = lambda rows: [rows[p * G : (p + 1) * G] for p in range(len(groups))]  # noqa: E731
    by_group = per_group(advantages)
    # A group whose advantages are all 0 (GRPO on equal rewards) has no policy-gradient signal; it
    # is trained only for the KL or entropy terms.
    regularized = ((rl.kl_coef > 0 and rl.kl_mode == "loss") or rl.entropy_coef > 0 or critic is not None
                   or teachers is not None)
    keep = [p for p, adv in enumerate(by_group) if regularized or any(bool(a.any()) for a in adv)]
    targets = None if critic is None else list(zip(per_group(critic.returns), per_group(critic.values)))
    sums = dict.fromkeys(_SUMS, 0.0)
    grad_norms = []
    model.train()
    if critic is not None:
        critic.critic.train()
    for epoch in range(rl.epochs):
        parts = split_minibatches(len(keep), rl.minibatches) if keep else ([range(0)] if corrections else [])
        for k, part in enumerate(parts):
            chosen = [keep[i] for i in part]
            work = [(groups[p], by_group[p], targets[p] if targets else None) for p in chosen]
            first = epoch == 0 and k == 0
            grad_norms.append(_minibatch_step(model, optimizer, work, cfg, pad_id, ref_model, critic, teachers,
                                              on_policy=first, sums=sums, corrections=corrections if first else ()))
    model.eval()
    if critic is not None:
        critic.critic.eval()
    out = _update_metrics(sums, grad_norms, critic is not None, teachers is not None, bool(corrections))
    out.update(groups_trained=len(keep), time_train_s=time.perf_counter() - start)
    return out


def _update_metrics(sums: dict, grad_norms: list[float], critic: bool, distill: bool, hindsight: bool) -> dict:
    """The update's metrics from the sums its minibatches added: per-token means over trained tokens,
    per-step means over optimizer steps."""
    n = max(sums["tokens"], 1.0)
    steps = max(len(grad_norms), 1)
    out = {
        "loss": sums["loss"] / steps,
        "entropy": sums["entropy"] / n,
        "kl": sums["kl"] / n,
        **({"opd_kl": sums["opd_kl"] / n} if distill else {}),
        **({"hindsight_nll": sums["hindsight_nll"]} if hindsight else {}),
        "clip_frac": (sums["clip_low"] + sums["clip_high"]) / n,
        "clip_frac_low": sums["clip_low"] / n,
        "clip_frac_high": sums["clip_high"] / n,
        "grad_norm": sum(grad_norms) / steps,
        "optimizer_steps": len(grad_norms) - int(sums["nonfinite_minibatches"]),
        "nonfinite_minibatches": int(sums["nonfinite_minibatches"]),
        "trained_tokens": sums["tokens"],
        "engine_logprob_abs_diff": sums["engine_lp_diff"] / n,
        "ratio_mean": sums["ratio"] / n,
        "ratio_max": sums["ratio_max"],
        **{f"entropy_turn{k[len('tokens_turn'):]}": sums["entropy_turn" + k[len("tokens_turn"):]] / v
           for k, v in sums.items() if k.startswith("tokens_turn") and v},
    }
    if critic:
        out.update(value_loss=sums["value_loss"] / steps, value_mse=sums["value_sq_err"] / n,
                   value_clip_frac=sums["value_clip"] / n)
    return out


def _minibatch_step(model, optimizer, work, cfg: Config, pad_id: int, ref_model, critic, teachers,
                    on_policy: bool, sums: dict, corrections: Sequence[Trajectory] = ()) -> float:
    """One optimizer step over `work` = [(group, advantages, critic targets)]; adds the step's sums into
    `sums`, returns the gradient norm.

    The ratio's denominator is the behaviour policy. While the weights are still the sampled ones
    (the first minibatch of the first epoch) that is the current logprob, detached, so the ratio
    starts at exactly 1; after an update it is the sampler's own logprob (a bf16 copy of the same
    weights, measured 0.002-0.007 nats/token away, logged as engine_logprob_abs_diff).
    """
    rl = cfg.rl
    aggregate = AGGREGATIONS.get(rl.aggregation)
    trajs = [t for g, _, _ in work for t in g.trajectories if not (rl.mask_truncated and t.truncated)]
    norm = aggregate.normalizer([sum(t.loss_mask()) for t in trajs], cfg.rollout.max_episode_tokens)
    optimizer.zero_grad(set_to_none=True)
    micros = split_ragged(micro_batches(work, rl.micro_batch_rows, teachers))
    micro_rows = [[t for group, _, _ in micro for t in group.trajectories] for micro in micros]
    with autocast(cfg.model.precision):  # the system prompt, forwarded once for every micro-batch
        shared = shared_prompt(model, micro_rows + ([list(corrections)] if corrections else []))
    for micro, rows in zip(micros, micro_rows):
        batch = make_batch(rows, pad_id, [a for _, adv, _ in micro for a in adv])
        mask = batch.loss_mask
        if rl.mask_truncated:  # after the advantages: a truncated sample still counted in its baseline
            mask = mask_truncated(mask, torch.tensor([t.truncated for t in rows]))
        target = None if micro[0][2] is None else tuple([x for _, _, t in micro for x in t[k]] for k in range(2))
        loss = _micro_loss(model, micro[0][0].task, rows, batch, mask, norm, cfg, ref_model, critic, target,
                           teachers, on_policy, sums, shared)
        loss.backward()
        sums["loss"] += float(loss.detach())
    if corrections:
        _hindsight_backward(model, corrections, cfg, pad_id, sums, shared)
    if shared is not None:  # after every backward that read the prompt's cache
        shared.backward()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, rl.max_grad_norm))
    if math.isfinite(grad_norm):  # a non-finite loss gives a non-finite norm too
        optimizer.step()
    else:  # skipped: the weights and the optimizer's moments stay as they were
        sums["nonfinite_minibatches"] += 1
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def micro_batches(work: Sequence, max_rows: int, teachers=None) -> list[list]:
    """Consecutive (group, advantages, target) items packed into micro-batches of at most `max_rows`
    rows; a group is never split (its rows share the prompt), and groups routed to different
    teachers never share one (the teachers score a micro-batch as a whole)."""
    out: list[list] = []
    rows = 0
    route = None
    for item in work:
        n = len(item[0].trajectories)
        key = tuple(teachers.chosen(item[0].task)) if teachers is not None else None
        if out and rows + n <= max_rows and key == route:
            out[-1].append(item)
            rows += n
        else:
            out.append([item])
            rows, route = n, key
    return out


def split_ragged(micros: list[list], min_saved: int = 64) -> list[list]:
    """Each micro-batch of one group whose rows differ much in length, as two: the rows sorted by
    length and cut where the fewest padded positions remain. A micro-batch is as wide as its longest
    row, so one group of 8 with four 21-token and four ~150-token completions paid for 8 x 162
    positions instead of 4 x 21 + 4 x 162. Both parts forward the group's prompt (beyond the step's
    shared system prompt, a few dozen tokens); the loss is a sum over rows with the minibatch's
    normalizer, so the gradient is the same."""
    out: list[list] = []
    for micro in micros:
        group, adv, target = micro[0]
        rows = group.trajectories
        if len(micro) > 1 or len(rows) < 4:
            out.append(micro)
            continue
        ids = [t.token_ids() for t in rows]
        p = common_prefix_len(ids, [t.loss_mask() for t in rows])
        order = sorted(range(len(rows)), key=lambda i: len(ids[i]))
        own = [len(ids[i]) - p for i in order]
        n = len(own)
        cost, k = min((k * own[k - 1] + (n - k) * own[-1], k) for k in range(1, n))
        if n * own[-1] - cost < max(min_saved, n * own[-1] // 5):
            out.append(micro)
            continue
        for idx in (order[:k], order[k:]):
            part = TrajectoryGroup(group.task, tuple(rows[i] for i in idx))
            out.append([(part, [adv[i] for i in idx], None if target is None else tuple([t[i] for i in idx] for t in target))])
    return out


def _turn_sums(trajectories: Sequence[Trajectory], batch, mask, entropy_BT: torch.Tensor, sums: dict) -> None:
    """Entropy summed per turn index (the first action, the second, ...): collapse often starts in
    one turn of the episode before the mean shows it."""
    turns = batch_layout([torch.tensor([k for k, turn in enumerate(t.turns)
                                        for _ in range(len(turn.obs_ids) + len(turn.action_ids))])
                          for t in trajectories], batch)
    for k in range(int(turns.max()) + 1 if turns.numel() else 0):
        sel = mask * (turns == k)
        sums[f"entropy_turn{k}"] = sums.get(f"entropy_turn{k}", 0.0) + float((entropy_BT * sel).sum())
        sums[f"tokens_turn{k}"] = sums.get(f"tokens_turn{k}", 0.0) + float(sel.sum())


def _hindsight_backward(model, corrections: Sequence[Trajectory], cfg: Config, pad_id: int, sums: dict,
                        shared: SharedPrompt | None = None) -> None:
    """hindsight.coef x the token-mean NLL of the verified corrections' actions (on the student's
    context without the hint), into the same gradient as the RL loss."""
    batch = make_batch(corrections, pad_id)
    with autocast(cfg.model.precision):
        logp = policy_forward(model, batch, shared=shared).logprobs
    nll = -(logp * batch.loss_mask).sum() / batch.loss_mask.sum().clamp(min=1.0)
    (cfg.hindsight.coef * nll).backward()
    sums["hindsight_nll"] += float(nll.detach())


def _distill_term(student_NV, teacher_NV, batch, mask, norm: float, cfg: Config, sums: dict) -> torch.Tensor:
    """coef x the aggregated reverse KL to the teacher on the trained positions (`algorithms/distill.py`)."""
    d = cfg.distill
    sel = batch.loss_mask.bool()
    out = DISTILL_LOSSES.get(d.loss)(student_NV, teacher_NV, batch.input_ids[sel], d.topk)
    per_token = torch.zeros(sel.shape, dtype=out.loss_N.dtype).masked_scatter(sel, out.loss_N)
    sums["opd_kl"] += float((torch.zeros(sel.shape).masked_scatter(sel, out.kl_N.float()) * mask).sum())
    return d.coef * AGGREGATIONS.get(cfg.rl.aggregation)(per_token, mask, norm)


def _micro_loss(model, task, rows: Sequence[Trajectory], batch, mask, norm: float, cfg: Config, ref_model, critic,
                target, teachers, on_policy: bool, sums: dict, shared: SharedPrompt | None = None) -> torch.Tensor:
    """The loss of one micro-batch (one or more whole groups; `task` routes the teachers, which
    `micro_batches` made the same for all of them): policy loss + entropy bonus + KL term + value
    loss + the on-policy distillation term."""
    rl = cfg.rl
    aggregate = AGGREGATIONS.get(rl.aggregation)
    on_trunk = critic is not None and critic.critic.shared  # a value head on the policy's own trunk
    with autocast(cfg.model.precision):
        out = policy_forward(model, batch, cfg.rollout.temperature, entropy_grad=rl.entropy_coef > 0,
                             value_head=critic.critic.head if on_trunk else None, full=teachers is not None,
                             shared=shared)
        values = out.values if on_trunk or critic is None else critic.critic.values(batch)
    logp = out.logprobs
    old = logp.detach() if on_policy else batch.old_logprobs
    pg = POLICY_LOSSES.get(rl.policy_loss)(LossInputs(logp, old, batch.advantages, mask, rl.clip_low, rl.clip_high))
    # OPD alone drops the policy-gradient term (rewards are then only logged)
    loss = aggregate(pg.per_token_loss_BT, mask, norm) if not cfg.distill.only else torch.zeros(())
    if teachers is not None:
        loss = loss + _distill_term(out.full, teachers.logprobs(task, batch, cfg), batch, mask, norm, cfg, sums)
    if rl.entropy_coef > 0:
        loss = loss + entropy_bonus(out.entropy, mask, rl.entropy_coef, aggregate, norm)
    if rl.kl_coef > 0 and rl.kl_mode == "loss":
        ref = ref_model if ref_model is not None else model
        with torch.no_grad(), autocast(cfg.model.precision), reference_context(ref):
            ref_lp, _ = token_logprobs(ref, batch, cfg.rollout.temperature)
        kl = KL_ESTIMATORS.get(rl.kl_estimator)(logp, ref_lp)
        loss = loss + rl.kl_coef * aggregate(kl, mask, norm)
        sums["kl"] += float((kl.detach() * mask).sum())
    if critic is not None:
        returns, old_values = (batch_layout(rows, batch) for rows in target)
        v = value_loss(values, old_values, returns, mask, rl.value_clip)
        vl = aggregate(v.per_token_loss_BT, mask, norm)
        loss = loss + rl.vf_coef * vl
        sums["value_loss"] += float(vl.detach())
        sums["value_sq_err"] += float(v.metrics["value_sq_err_sum"])
        sums["value_clip"] += float(v.metrics["value_clip_tokens"])
    sums["entropy"] += float((out.entropy.detach() * mask).sum())
    _turn_sums(rows, batch, mask, out.entropy.detach(), sums)
    ratio = torch.exp((logp.detach() - old) * mask)
    sums["ratio"] += float((ratio * mask).sum())
    if mask.any():
        sums["ratio_max"] = max(sums["ratio_max"], float(ratio[mask.bool()].max()))
    sums["clip_low"] += float(pg.metrics["clip_low_tokens"])
    sums["clip_high"] += float(pg.metrics["clip_high_tokens"])
    sums["tokens"] += float(mask.sum())
    sums["engine_lp_diff"] += float(((logp.detach() - batch.old_logprobs).abs() * mask).sum())
    return loss
