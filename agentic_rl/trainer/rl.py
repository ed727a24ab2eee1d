"""The RL update: scored groups -> advantages -> per-token loss -> one optimizer step.

One micro-batch per group (its rows share the prompt, forwarded once). Losses are aggregated with
batch-global normalizers, so the gradient equals the whole batch's gradient however it is split.
A group whose advantages are all zero contributes nothing to the policy loss: without a KL term it
is skipped (it still counts in the normalizer, so the gradient is unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from agentic_rl.algorithms.advantages import ADVANTAGES
from agentic_rl.algorithms.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, LossInputs
from agentic_rl.engines.precision import autocast
from agentic_rl.models.lora import reference_context
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.forward import make_batch, token_logprobs
from agentic_rl.types import TrajectoryGroup


def compute_advantages(groups: Sequence[TrajectoryGroup], estimator: str) -> torch.Tensor:
    """(P, G) advantages; groups must have equal size."""
    rewards_PG = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
    return ADVANTAGES.get(estimator)(rewards_PG)


def rl_update(
    model, optimizer, groups: Sequence[TrajectoryGroup], adv_PG: torch.Tensor, cfg: Config, pad_id: int,
    ref_model=None,
) -> dict[str, float]:
    """One optimizer step on the groups, with advantages (P, G) from `compute_advantages`."""
    rl = cfg.rl
    start = time.perf_counter()
    loss_fn = POLICY_LOSSES.get(rl.policy_loss)
    aggregate = AGGREGATIONS[rl.aggregation]
    kl_fn = KL_ESTIMATORS.get(rl.kl_estimator) if rl.kl_coef > 0 else None
    all_trajs = [t for g in groups for t in g.trajectories]
    # token-mean divides by the batch's sampled tokens; seq-mean-token-mean by its sequences
    norm = sum(sum(t.loss_mask()) for t in all_trajs) if rl.aggregation == "token-mean" else len(all_trajs)
    sums = {"loss": 0.0, "entropy": 0.0, "kl": 0.0, "clip_low": 0.0, "clip_high": 0.0, "tokens": 0.0,
            "engine_lp_diff": 0.0}
    model.train()
    optimizer.zero_grad(set_to_none=True)
    for g, group in enumerate(groups):
        if kl_fn is None and bool((adv_PG[g] == 0).all()):
            continue
        batch = make_batch(group.trajectories, adv_PG[g].tolist(), pad_id)
        with autocast(cfg.model.precision):
            logp, entropy = token_logprobs(model, batch, cfg.rollout.temperature)
        mask = batch.loss_mask
        # One optimizer step per rollout batch: the behaviour policy is the current one, so the ratio
        # starts at exactly 1 (engine logprobs differ slightly: bf16 sampling; logged below).
        out = loss_fn(LossInputs(logp, logp.detach(), batch.advantages, mask, rl.clip_low, rl.clip_high))
        loss = aggregate(out.per_token_loss_BT, mask, norm)
        if kl_fn is not None:
            ref = ref_model if ref_model is not None else model
            with torch.no_grad(), autocast(cfg.model.precision), reference_context(ref):
                ref_lp, _ = token_logprobs(ref, batch, cfg.rollout.temperature)
            kl = kl_fn(logp, ref_lp)
            loss = loss + rl.kl_coef * aggregate(kl, mask, norm)
            sums["kl"] += float((kl.detach() * mask).sum())
        loss.backward()
        sums["loss"] += float(loss.detach())
        sums["entropy"] += float((entropy * mask).sum())
        sums["clip_low"] += float(out.metrics["clip_low_tokens"])
        sums["clip_high"] += float(out.metrics["clip_high_tokens"])
        sums["tokens"] += float(mask.sum())
        sums["engine_lp_diff"] += float(((logp.detach() - batch.old_logprobs).abs() * mask).sum())
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), rl.max_grad_norm) if sums["tokens"] else 0.0
    if sums["tokens"]:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    n = max(sums["tokens"], 1.0)
    return {
        "loss": sums["loss"],
        "entropy": sums["entropy"] / n,
        "kl": sums["kl"] / n,
        "clip_frac": (sums["clip_low"] + sums["clip_high"]) / n,
        "grad_norm": float(grad_norm),
        "trained_tokens": sums["tokens"],
        "engine_logprob_abs_diff": sums["engine_lp_diff"] / n,
        "time_train_s": time.perf_counter() - start,
    }
