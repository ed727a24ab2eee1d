"""The RL update: scored groups with their credit -> the loss terms -> optimizer steps.

The groups of one rollout are split into `rl.optim.minibatches` minibatches, each one optimizer step,
for `rl.optim.epochs` passes (PPO's minibatch epochs: more learning per sampled token). Within a
minibatch a micro-batch is one group (its rows share the prompt, forwarded once), or several small
groups up to `rl.optim.micro_batch_rows` rows (they share the system prompt and tool schemas; one wide
forward costs less than many narrow ones). Every term uses the minibatch's global normalizer, so the
gradient equals the whole minibatch's gradient however it is split.

With `rl.optim.pack` a micro-batch is forwarded padding-free (its rows back to back in one row,
`trainer/batching.py`), and micro-batches are sized by tokens instead of rows, as verl's
remove-padding and dynamic batch size do: whole groups up to `rl.optim.micro_batch_tokens` tokens
(a group counts its prompt once and each row's own tokens), by default the tokens the memory
estimate holds for its largest micro-batch (`models/memory.py`'s `micro_batch_tokens`). A group is
still never split, nor shared between data-parallel ranks.

Groups whose advantages are all zero (GRPO on equal rewards) carry no policy-gradient signal.
Without a KL, entropy, value or distillation term they are dropped before the split (DAPO's
dynamic-sampling filter), so every minibatch has signal.

The PPO ratio's denominator is the proximal policy: the trainer's logprobs before the update. On the
first minibatch of the first epoch that is the current forward, detached (the ratio is exactly 1);
when more optimizer steps follow, one no-grad forward before the update keeps them for the later
minibatches and epochs. The sampler's own logprobs (the behaviour policy) enter through the rollout
correction's weight on the policy-gradient term (`algorithms/correction.py`, `rl.rollout_correction`),
and the gap between the two is logged every step (`mismatch_*`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import torch

from agentic_rl.algorithms.correction import Correction, correct, mismatch
from agentic_rl.algorithms.dapo import mask_truncated
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import SharedPrompt, common_prefix_len, shared_prompt
from agentic_rl.models.memory import micro_batch_tokens
from agentic_rl.models.precision import autocast
from agentic_rl.trainer.batching import Layout, batch_layout, make_batch, trajectory_rows
from agentic_rl.trainer.config import OptimConfig
from agentic_rl.trainer.credit import Credit
from agentic_rl.trainer.distributed import DataParallel
from agentic_rl.trainer.loss_terms import Loss, LossTerm, MicroBatch
from agentic_rl.trainer.stats import UpdateHealth, UpdateStats
from agentic_rl.types import RolloutBatch, Trajectory, TrajectoryGroup


@dataclass(frozen=True)
class UpdateBatch:
    """What an update trains on: the sampled groups, their credit, and hindsight corrections."""

    rollout: RolloutBatch
    credit: Credit
    corrections: Sequence[Trajectory] = ()


@dataclass(frozen=True, kw_only=True)
class UpdateResult:
    """An update's metrics row (`UpdateStats.metrics()` + groups_trained, time_train_s) and the typed
    values the RL loop decides on."""

    metrics: dict[str, float]
    health: UpdateHealth


@dataclass(frozen=True)
class GroupWork:
    """One group, with its per-trajectory advantages and (PPO with a critic) returns and values."""

    group: TrajectoryGroup
    advantages: Sequence[torch.Tensor]
    returns: Sequence[torch.Tensor] | None = None
    values: Sequence[torch.Tensor] | None = None
    proximal: Sequence[torch.Tensor] | None = None  # the trainer's logprobs before the update, per trajectory


def split_minibatches(n: int, k: int) -> list[range]:
    """`n` groups into min(k, n) contiguous minibatches whose sizes differ by at most one."""
    k = max(1, min(k, n))
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


def group_work(batch: UpdateBatch) -> list[GroupWork]:
    """The credit, cut per group (groups have equal sizes), without the rows the machine failed."""
    groups, credit = batch.rollout.groups, batch.credit
    G = len(groups[0].trajectories) if groups else 0
    cut = lambda rows: [rows[p * G : (p + 1) * G] for p in range(len(groups))]  # noqa: E731
    returns = cut(credit.returns) if credit.returns is not None else [None] * len(groups)
    values = cut(credit.values) if credit.values is not None else [None] * len(groups)
    work = [GroupWork(g, a, r, v) for g, a, r, v in zip(groups, cut(credit.advantages), returns, values)]
    return [_without_infra_failures(w) for w in work]


def _without_infra_failures(w: GroupWork) -> GroupWork:
    """The group's rows the machine did not fail: the others train nothing, and an empty failed row
    would cut the prompt the group's rows share."""
    keep = [i for i, t in enumerate(w.group.trajectories) if t.infra_failure is None]
    return w if len(keep) == len(w.group.trajectories) else _subgroup(w, keep)


def rl_update(model, optimizer, batch: UpdateBatch, loss: Loss, optim: OptimConfig, pad_id: int,
              critic=None, parallel: DataParallel | None = None) -> UpdateResult:
    """`optim.epochs` passes of `optim.minibatches` optimizer steps over the groups. Hindsight
    corrections join the first optimizer step (a step of their own when no group has signal).
    `critic`: a critic module trained by the value term, put in training mode for the update.
    `parallel`: this rank's share of data-parallel training (`distributed.py`); every rank passes
    the whole batch, each trains its share of every minibatch."""
    start = time.perf_counter()
    parallel = parallel or DataParallel(model)
    if batch.corrections and not loss.on("corrections"):
        raise ValueError("hindsight corrections to train on, but no term trains them (hindsight.coef is 0)")
    work = [w for w in group_work(batch) if loss.regularized or any(bool(a.any()) for a in w.advantages)]
    stats = UpdateStats()
    modules = [m for m in (model, critic) if m is not None]
    for m in modules:
        m.train()
    parts = split_minibatches(len(work), optim.minibatches) if work else ([range(0)] if batch.corrections else [])
    if optim.epochs * len(parts) > 1:  # optimizer steps before some groups' forward
        mine = {i for part in parts for i in parallel.world.share(part)}
        layout = Layout(pad_id, optim.pack)
        proximal = dict(zip(sorted(mine), parallel.each([partial(_with_proximal, parallel, work[i], loss, layout)
                                                           for i in sorted(mine)])))
        work = [proximal.get(i, w) for i, w in enumerate(work)]
    for epoch in range(optim.epochs):
        for k, part in enumerate(parts):
            on_policy = epoch == 0 and k == 0
            step = Step(on_policy=on_policy, first_epoch=epoch == 0, corrections=batch.corrections if on_policy else ())
            stats.add(_minibatch_step(parallel, optimizer, [work[i] for i in part], loss, optim, pad_id, step,
                                      critic=critic))
    for m in modules:
        m.eval()
    stats = _over_ranks(parallel, stats)
    out = stats.metrics(critic is not None, loss.teachers is not None, bool(batch.corrections))
    out.update(groups_trained=len(work), time_train_s=time.perf_counter() - start)
    return UpdateResult(metrics=out, health=stats.health())


@dataclass(frozen=True)
class Step:
    """Where an optimizer step sits in the update."""

    on_policy: bool  # no optimizer step yet: the current logprobs are the proximal ones
    first_epoch: bool  # the rows' first pass: the sampler-trainer gap is counted once
    corrections: Sequence[Trajectory] = ()  # hindsight corrections trained in this step (the update's first)


@torch.no_grad()
def _with_proximal(parallel: DataParallel, w: GroupWork, loss: Loss, layout: Layout) -> GroupWork:
    """`w` with the trainer's logprobs of its trajectories under the weights before the update."""
    batch = layout.batch(w.group.trajectories).to(device_of(parallel.model))
    with autocast(loss.precision, batch.input_ids.device):
        logprobs = parallel.forward(batch, temperature=loss.temperature).logprobs
    return replace(w, proximal=trajectory_rows(logprobs, batch, w.group))


def _minibatch_step(parallel: DataParallel, optimizer, work: Sequence[GroupWork], loss: Loss, optim: OptimConfig,
                    pad_id: int, step: Step, critic=None) -> UpdateStats:
    """One optimizer step over `work` (this rank's share of it): the micro-batches' backward passes
    (then the corrections'), the shared prompt's, a clipped gradient, and the step (skipped when the
    gradient is not finite). The normalizers count the whole minibatch, every rank's rows."""
    stats, model, w = UpdateStats(), parallel.model, parallel.world
    trained = [t for g in work for t in g.group.trajectories if not (loss.mask_truncated and t.truncated)]
    norm = loss.normalizer(trained)
    optimizer.zero_grad(set_to_none=True)
    micros = _micro_batches(w.share(work), loss, optim)
    micro_rows = [[t for g in micro for t in g.group.trajectories] for micro in micros]
    corrections = step.corrections
    fixes = w.share(corrections)
    shared = None
    if parallel.shares_prompt_forward:  # the system prompt, forwarded once for every micro-batch
        with autocast(loss.precision, device_of(model)):
            shared = shared_prompt(model, micro_rows + ([list(fixes)] if fixes else []))
    layout = Layout(pad_id, optim.pack)
    passes = [partial(_micro_loss, parallel, micro, rows, loss, norm, layout, step, shared)
              for micro, rows in zip(micros, micro_rows)]
    if fixes:
        fix_norm = max(float(sum(sum(t.loss_mask()) for t in corrections)), 1.0)
        passes.append(partial(_corrections_loss, parallel, fixes, loss, pad_id, fix_norm, shared))
    for pass_stats in parallel.backward(passes, extra=_outside(critic, model)):
        stats.add(pass_stats)
    if shared is not None:  # after every backward that read the prompt's cache
        shared.backward()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    grad_norm = sharding.value(torch.nn.utils.clip_grad_norm_(params, optim.max_grad_norm))
    if math.isfinite(grad_norm):  # a non-finite loss gives a non-finite norm too
        optimizer.step()
    else:  # skipped: the weights and the optimizer's moments stay as they were
        stats.nonfinite_minibatches += 1
    optimizer.zero_grad(set_to_none=True)
    stats.grad_norms.append(grad_norm)
    return stats


def _micro_loss(parallel: DataParallel, micro: Sequence[GroupWork], rows: Sequence[Trajectory], loss: Loss,
                norm: float, layout: Layout, step: Step, shared: SharedPrompt | None) -> tuple[torch.Tensor, UpdateStats]:
    """One forward pass of the micro-batch's rows, and the sum of the loss terms on it."""
    batch = layout.batch(rows, [a for w in micro for a in w.advantages]).to(device_of(parallel.model))
    mask = batch.loss_mask
    if loss.mask_truncated:  # after the advantages: a truncated sample still counted in its baseline
        mask = mask_truncated(mask, torch.tensor([t.truncated for t in rows], device=mask.device))
    with autocast(loss.precision, mask.device):
        out = parallel.forward(batch, shared=shared, **loss.forward_keywords("sampled"))
    proximal = (out.logprobs.detach() if step.on_policy
                else batch_layout([p for w in micro for p in w.proximal], batch) * batch.loss_mask)
    c = loss.correction
    weights = correct(c.mode, proximal, batch.sampler_logprobs, mask, c.threshold, c.geo_band, loss.sequence_level)
    critic = micro[0].returns is not None
    mb = MicroBatch(rows=rows, batch=batch, mask=mask, proximal=proximal, weights=weights.weights_BT,
                    task=micro[0].group.task,
                    returns=batch_layout([r for w in micro for r in w.returns], batch) if critic else None,
                    old_values=batch_layout([v for w in micro for v in w.values], batch) if critic else None)
    stats = _token_stats(out, mb)
    if step.first_epoch:
        stats.add(_correction_stats(mb, weights))
    total, term_stats = _sum_terms(loss.on("sampled"), out, mb, norm)
    stats.add(term_stats)
    return total, stats


def _sum_terms(terms: Sequence[LossTerm], out, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
    """The terms' sum on the micro-batch (0 without a term), and their statistics with it as `loss`."""
    stats, total = UpdateStats(), None
    for term in terms:
        value, term_stats = term(out, mb, norm)
        total = value if total is None else total + value
        stats.add(term_stats)
    total = total if total is not None else torch.zeros((), device=mb.mask.device)
    stats.loss = float(total.detach())
    return total, stats


def _token_stats(out, mb: MicroBatch) -> UpdateStats:
    """What every micro-batch reports whatever the terms: entropy (also per turn), the ratio to the
    behaviour policy, the trainer-sampler logprob gap, the trained tokens."""
    logp, mask = out.logprobs.detach(), mb.mask
    ratio = torch.exp((logp - mb.proximal) * mask)
    stats = UpdateStats(entropy=float((out.entropy.detach() * mask).sum()), ratio=float((ratio * mask).sum()),
                        ratio_max=float(ratio[mask.bool()].max()) if mask.any() else 0.0, tokens=float(mask.sum()),
                        engine_lp_diff=float(((logp - mb.batch.sampler_logprobs).abs() * mask).sum()))
    turns = batch_layout([torch.tensor([k for k, turn in enumerate(t.turns)
                                        for _ in range(len(turn.obs_ids) + len(turn.action_ids))])
                          for t in mb.rows], mb.batch)
    for k in range(int(turns.max()) + 1 if turns.numel() else 0):
        sel = mask * (turns == k)
        stats.entropy_by_turn[k] = float((out.entropy.detach() * sel).sum())
        stats.tokens_by_turn[k] = float(sel.sum())
    return stats


def _correction_stats(mb: MicroBatch, c: Correction) -> UpdateStats:
    """The sampler-trainer gap on the micro-batch's tokens, and what the correction did about it."""
    gap = mismatch(mb.proximal, mb.batch.sampler_logprobs, mb.mask)
    rows = float(mb.mask.bool().any(1).sum())
    return UpdateStats(mismatch_abs=gap.abs_sum, mismatch_max=gap.abs_max, mismatch_kl=gap.kl_sum,
                       mismatch_tokens=gap.tokens, corrected_clipped=c.clipped_tokens,
                       corrected_masked=c.masked_tokens, corrected_masked_rows=c.masked_sequences,
                       corrected_rows=rows)


def _corrections_loss(parallel: DataParallel, corrections: Sequence[Trajectory], loss: Loss, pad_id: int,
                      norm: float, shared: SharedPrompt | None) -> tuple[torch.Tensor, UpdateStats]:
    """The terms on (this rank's share of) the hindsight corrections, normalized by every
    correction's tokens; their gradient joins the RL loss's."""
    batch = make_batch(corrections, pad_id).to(device_of(parallel.model))
    with autocast(loss.precision, batch.input_ids.device):
        out = parallel.forward(batch, shared=shared, **loss.forward_keywords("corrections"))
    return _sum_terms(loss.on("corrections"), out, MicroBatch(rows=corrections, batch=batch, mask=batch.loss_mask),
                      norm)


def _outside(critic, model) -> list[torch.nn.Parameter]:
    """A critic's trainable parameters that are not the policy's (its head, its own backbone)."""
    if critic is None:
        return []
    policy = {id(p) for p in model.parameters()}
    return [p for p in critic.parameters() if p.requires_grad and id(p) not in policy]


def _over_ranks(parallel: DataParallel, stats: UpdateStats) -> UpdateStats:
    """The update's statistics summed over every rank's rows (the optimizer steps, the same on
    every rank, counted once)."""
    if parallel.world.size == 1:
        return stats
    total, *others = parallel.world.gather(stats)
    for other in others:
        other.grad_norms, other.nonfinite_minibatches = [], 0
        total.add(other)
    return total


def _route(loss: Loss):
    """task -> the teachers it is routed to (micro-batches never mix routes), or None."""
    teachers = loss.teachers
    return (lambda task: tuple(teachers.chosen(task))) if teachers is not None else None


def _micro_batches(work: Sequence[GroupWork], loss: Loss, optim: OptimConfig) -> list[list[GroupWork]]:
    """This rank's groups as micro-batches: by rows, a ragged group cut in two (padded); by tokens
    (packed). With a token bound no micro-batch holds more: a group past it is cut into parts."""
    bound = optim.micro_batch_tokens
    if not optim.pack:
        micros = split_ragged(micro_batches(work, optim.micro_batch_rows, _route(loss)))
        out = []
        for m in micros:
            if not bound or sum(map(group_tokens, m)) <= bound:
                out.append(m)
            else:
                out += [[part] for w in m for part in within_tokens(w, bound)]
        return out
    G = max((len(w.group.trajectories) for w in work), default=1)
    budget = bound or micro_batch_tokens(G, optim.micro_batch_rows, loss.max_len)
    return micro_batches([p for w in work for p in within_tokens(w, budget)], budget, _route(loss), size=group_tokens)


def within_tokens(w: GroupWork, bound: int) -> list[GroupWork]:
    """`w` as consecutive parts of its rows, each at most `bound` tokens as `group_tokens` counts them
    (the prompt once, each row's own tokens), one row at least: a long episode's group is forwarded
    a few rows at a time. Each part forwards the prompt; the loss is a sum over rows with the
    minibatch's normalizer, so the gradient is the group's."""
    if group_tokens(w) <= bound:
        return [w]
    ids = [t.token_ids() for t in w.group.trajectories]
    p = common_prefix_len(ids, [t.loss_mask() for t in w.group.trajectories])
    parts, used = [[]], p
    for i, row in enumerate(ids):
        if parts[-1] and used + len(row) - p > bound:
            parts.append([])
            used = p
        parts[-1].append(i)
        used += len(row) - p
    return [_subgroup(w, idx) for idx in parts]


def group_tokens(w: GroupWork) -> int:
    """The tokens a group's forward takes: its shared prompt once, and each row's own tokens."""
    ids = [t.token_ids() for t in w.group.trajectories]
    p = common_prefix_len(ids, [t.loss_mask() for t in w.group.trajectories])
    return p + sum(len(i) - p for i in ids)


def group_rows(w: GroupWork) -> int:
    return len(w.group.trajectories)


def micro_batches(work: Sequence[GroupWork], max_size: int, route=None, size=group_rows) -> list[list[GroupWork]]:
    """Consecutive groups packed into micro-batches of at most `max_size` (rows, or what `size`
    counts: `group_tokens`); a group is never split (its rows share the prompt), a larger one is a
    micro-batch of its own, and groups with different `route(task)` never share one (the teachers
    score a micro-batch as a whole)."""
    out: list[list[GroupWork]] = []
    used = 0
    current = None
    for item in work:
        n = size(item)
        key = route(item.group.task) if route is not None else None
        if out and used + n <= max_size and key == current:
            out[-1].append(item)
            used += n
        else:
            out.append([item])
            used, current = n, key
    return out


def split_ragged(micros: list[list[GroupWork]], min_saved: int = 64) -> list[list[GroupWork]]:
    """Each micro-batch of one group whose rows differ much in length, as two: the rows sorted by
    length and cut where the fewest padded positions remain. A micro-batch is as wide as its longest
    row, so one group of 8 with four 21-token and four ~150-token completions paid for 8 x 162
    positions instead of 4 x 21 + 4 x 162. Both parts forward the group's prompt (beyond the step's
    shared system prompt, a few dozen tokens); the loss is a sum over rows with the minibatch's
    normalizer, so the gradient is the same."""
    out: list[list[GroupWork]] = []
    for micro in micros:
        w = micro[0]
        rows = w.group.trajectories
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
        out += [[_subgroup(w, idx)] for idx in (order[:k], order[k:])]
    return out


def _subgroup(w: GroupWork, idx: Sequence[int]) -> GroupWork:
    def pick(xs):
        return None if xs is None else [xs[i] for i in idx]

    return GroupWork(TrajectoryGroup(w.group.task, tuple(w.group.trajectories[i] for i in idx)), pick(w.advantages),
                     pick(w.returns), pick(w.values), pick(w.proximal))
