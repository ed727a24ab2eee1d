"""Supervised fine-tuning on demonstration trajectories: loss on sampled-position (action) tokens only."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import torch

from agentic_rl.engines.precision import autocast
from agentic_rl.trainer.forward import make_batch, token_logprobs
from agentic_rl.types import Trajectory


def sft_step(model, optimizer, trajectories: Sequence[Trajectory], pad_id: int, precision: str) -> dict[str, float]:
    """One optimizer step of token-mean negative log-likelihood over the action tokens."""
    model.train()
    batch = make_batch(trajectories, pad_id)
    with autocast(precision):
        logp, _ = token_logprobs(model, batch)
    mask = batch.loss_mask
    loss = -(logp * mask).sum() / mask.sum().clamp(min=1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    model.eval()
    return {"loss": float(loss.detach()), "grad_norm": float(grad_norm), "trained_tokens": float(mask.sum())}


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
) -> None:
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    order = list(range(len(trajectories)))
    rng = random.Random(seed)
    step = 0
    for _ in range(epochs):
        rng.shuffle(order)
        for k in range(0, len(order), batch_size):
            t0 = time.perf_counter()
            metrics = sft_step(model, optimizer, [trajectories[i] for i in order[k : k + batch_size]], pad_id, precision)
            step += 1
            metrics["time_step_s"] = time.perf_counter() - t0
            on_step(step, metrics)
