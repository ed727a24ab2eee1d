"""Supervised fine-tuning on trajectories: loss on action tokens only (what the policy writes), the
same token layout and masks as RL.

An optimizer step covers `grad_accum` micro-batches of `batch_size` trajectories; the loss is the
token mean over the whole step (each micro-batch's sum divided by the step's token count), so the
gradient does not depend on how the step is split.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import torch

from agentic_rl.engines.precision import autocast
from agentic_rl.trainer.forward import make_batch, make_packed_batch, pack, token_logprobs
from agentic_rl.types import Trajectory


def sft_step(model, optimizer, micro_batches: Sequence[Sequence], pad_id: int, precision: str) -> dict[str, float]:
    """One optimizer step of token-mean negative log-likelihood over the action tokens. A micro-batch
    holds trajectories, or packed rows (lists of trajectories sharing a row)."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    batches = [make_packed_batch(mb, pad_id) if isinstance(mb[0], list) else make_batch(mb, pad_id)
               for mb in micro_batches]
    tokens = sum(float(b.loss_mask.sum()) for b in batches)
    total = 0.0
    for batch in batches:
        with autocast(precision):
            logp, _ = token_logprobs(model, batch)
        loss = -(logp * batch.loss_mask).sum() / max(tokens, 1.0)
        loss.backward()
        total += float(loss.detach())
    grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    model.eval()
    return {"loss": total, "grad_norm": float(grad_norm), "trained_tokens": tokens}


@torch.no_grad()
def sft_loss(model, trajectories: Sequence[Trajectory], pad_id: int, precision: str, batch_size: int = 8) -> float:
    """Token-mean NLL of the action tokens (the held-out loss)."""
    nll, tokens = 0.0, 0.0
    for k in range(0, len(trajectories), batch_size):
        batch = make_batch(trajectories[k : k + batch_size], pad_id)
        with autocast(precision):
            logp, _ = token_logprobs(model, batch)
        nll -= float((logp * batch.loss_mask).sum())
        tokens += float(batch.loss_mask.sum())
    return nll / max(tokens, 1.0)


def adamw(params, lr: float) -> torch.optim.Optimizer:
    """AdamW without weight decay, fused into one kernel where torch has one for the parameters'
    device: on this CPU a step over SmolLM2's 135M parameters takes 0.07 s fused against 0.24-0.31 s
    as a loop over tensors. `params` is a list of tensors or of parameter groups."""
    tensors = [t for g in params for t in (g["params"] if isinstance(g, dict) else [g])]
    fused = bool(tensors) and all(t.device.type in ("cpu", "cuda") and t.dtype.is_floating_point for t in tensors)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=fused or None)


def sft_optimizer(model, lr: float) -> torch.optim.Optimizer:
    return adamw([p for p in model.parameters() if p.requires_grad], lr)


def sft_train(
    model,
    trajectories: Sequence[Trajectory],
    lr: float,
    batch_size: int,
    epochs: int,
    pad_id: int,
    precision: str,
    seed: int,
    on_step: Callable[[int, dict], None],
    grad_accum: int = 1,
    pack_tokens: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
    start_step: int = 0,
) -> None:
    """`pack_tokens` > 0: whole trajectories are packed into rows of at most that many tokens, and
    `batch_size` counts rows. A resumed run passes its restored `optimizer` and the steps already
    done (`start_step`): the data order is replayed from the seed and those steps are skipped."""
    optimizer = optimizer or sft_optimizer(model, lr)
    if pack_tokens:
        trajectories = pack(trajectories, pack_tokens)
    order = list(range(len(trajectories)))
    rng = random.Random(seed)
    step = 0
    per_step = batch_size * grad_accum
    for _ in range(epochs):
        rng.shuffle(order)
        for k in range(0, len(order), per_step):
            if step < start_step:
                step += 1
                continue
            chunk = [trajectories[i] for i in order[k : k + per_step]]
            micro = [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
            t0 = time.perf_counter()
            metrics = sft_step(model, optimizer, micro, pad_id, precision)
            step += 1
            metrics["time_step_s"] = time.perf_counter() - t0
            on_step(step, metrics)
