"""Supervised fine-tuning on trajectories: loss on action tokens only (what the policy writes), the
same token layout and masks as RL; and the SFT stage of a run (its data, logging and states).

An optimizer step covers `grad_accum` micro-batches of `batch_size` trajectories; the loss is the
token mean over the whole step (each micro-batch's sum divided by the step's token count), so the
gradient does not depend on how the step is split.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from agentic_rl.data.curriculum import MIX_STRETCH, mixed_tasks
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import token_logprobs
from agentic_rl.models.precision import autocast
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.sft_data import load_sft_file
from agentic_rl.trainer.batching import make_batch, make_packed_batch, pack
from agentic_rl.trainer.config import SFTConfig
from agentic_rl.trainer.distributed import DataParallel
from agentic_rl.trainer.state import SavedState
from agentic_rl.types import Trajectory

if TYPE_CHECKING:
    from agentic_rl.trainer.loop import Run


def sft_step(model, optimizer, micro_batches: Sequence[Sequence], pad_id: int, precision: str,
             parallel: DataParallel | None = None) -> dict[str, float]:
    """One optimizer step of token-mean negative log-likelihood over the action tokens. A micro-batch
    holds trajectories, or packed rows (lists of trajectories sharing a row). `parallel`: every
    rank passes the whole step and trains its share of the micro-batches (`distributed.py`)."""
    parallel = parallel or DataParallel(model)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    device = device_of(model)
    batches = [(make_packed_batch(mb, pad_id) if isinstance(mb[0], list) else make_batch(mb, pad_id))
               for mb in micro_batches]
    tokens = max(sum(float(b.loss_mask.sum()) for b in batches), 1.0)  # every rank's

    def nll(batch) -> tuple[torch.Tensor, float]:
        batch = batch.to(device)
        with autocast(precision, device):
            logp = parallel.forward(batch).logprobs
        loss = -(logp * batch.loss_mask).sum() / tokens
        return loss, float(loss.detach())

    losses = parallel.backward([partial(nll, b) for b in parallel.world.share(batches)])
    total = sum(parallel.world.gather(sum(losses)))
    grad_norm = sharding.value(torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0))
    optimizer.step()
    model.eval()
    return {"loss": total, "grad_norm": float(grad_norm), "trained_tokens": tokens}


@torch.no_grad()
def sft_loss(model, trajectories: Sequence[Trajectory], pad_id: int, precision: str, batch_size: int = 8) -> float:
    """Token-mean NLL of the action tokens (the held-out loss)."""
    nll, tokens = 0.0, 0.0
    for k in range(0, len(trajectories), batch_size):
        batch = make_batch(trajectories[k : k + batch_size], pad_id).to(device_of(model))
        with autocast(precision, batch.input_ids.device):
            logp, _ = sharding.call(model, token_logprobs, batch)
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


def sft_steps(model, trajectories: Sequence[Trajectory], s: SFTConfig, pad_id: int, precision: str,
              optimizer: torch.optim.Optimizer, start_step: int = 0,
              parallel: DataParallel | None = None) -> Iterator[tuple[int, dict[str, float]]]:
    """Trains; yields (optimizer step, its metrics) after each step. With `s.pack` > 0 whole
    trajectories are packed into rows of at most that many tokens, and `s.batch_size` counts rows. A
    resumed run passes its restored `optimizer` and the steps already done (`start_step`): the data
    order is replayed from `s.seed` and those steps are skipped."""
    if s.pack:
        trajectories = pack(trajectories, s.pack)
    order = list(range(len(trajectories)))
    rng = random.Random(s.seed)
    step = 0
    per_step = s.batch_size * s.grad_accum
    for _ in range(s.epochs):
        rng.shuffle(order)
        for k in range(0, len(order), per_step):
            if step < start_step:
                step += 1
                continue
            chunk = [trajectories[i] for i in order[k : k + per_step]]
            micro = [chunk[j : j + s.batch_size] for j in range(0, len(chunk), s.batch_size)]
            t0 = time.perf_counter()
            metrics = sft_step(model, optimizer, micro, pad_id, precision, parallel)
            step += 1
            metrics["time_step_s"] = time.perf_counter() - t0
            yield step, metrics


def sft_trajectories(spec: EnvSpec, s: SFTConfig, options: dict, tokenizer) -> list:
    """The SFT data: a file (`sft.data`) or the env's demonstrations, capped at `sft.examples`."""
    if s.data:
        env = spec.make_env(options)
        data = load_sft_file(s.data, env.format, tokenizer, env.tool_schemas, s.min_reward)
        return data[: s.examples] if s.examples else data
    if spec.demonstration is None:
        raise ValueError(f"env {spec.name!r} has no demonstrations: give sft.data or set sft.examples: 0")
    tasks = (mixed_tasks(spec.tasks(s.split, MIX_STRETCH * s.examples, s.seed), s.mix_key, s.mix, s.examples) if s.mix
             else spec.tasks(s.split, s.examples, s.seed))
    return [demonstrate(spec, options, t, tokenizer)[1] for t in tasks]


def cut_by_rollout(data: Sequence[Trajectory], ro) -> list[str]:
    """What of the SFT data the rollout would cut, one line a budget (empty: all of it fits). SFT
    teaches the actions the rollout will sample: one longer than `rollout.max_new_tokens`, or an
    episode past `rollout.max_turns` or `rollout.max_episode_tokens`, is cut in every RL episode and
    every evaluation (a tool call cut before its closing tag is no call). Each line names the value
    that fits all of the data."""
    limits = {"max_new_tokens": lambda t: max((len(x.action_ids) for x in t.turns if x.trained), default=0),
              "max_turns": lambda t: len(t.turns), "max_episode_tokens": lambda t: t.num_generated}
    out = []
    for key, size in limits.items():
        sizes = [size(t) for t in data]
        over = sum(n > getattr(ro, key) for n in sizes)
        if over:
            out.append(f"rollout.{key} is {getattr(ro, key)}, but {over} of the {len(data)} SFT examples need more "
                       f"(at most {max(sizes)}): the rollout will cut what SFT teaches; set rollout.{key}: "
                       f"{max(sizes)} or more")
    return out


def run_sft(shared: Run, saved: SavedState | None = None) -> list[float]:
    """Trains, logs every step (and the held-out loss), returns the training losses. A state every
    `checkpoint.sft_every` steps; a resumed run continues after `progress.sft_step`. `shared`: what
    the stages of `train()` share."""
    model, tokenizer, spec, cfg = shared.model, shared.tokenizer, shared.spec, shared.cfg
    logger, store, progress = shared.logger, shared.store, shared.progress
    s = cfg.sft
    data = sft_trajectories(spec, s, cfg.env.options, tokenizer)
    for line in cut_by_rollout(data, cfg.rollout):  # a warning: a smoke recipe may cut on purpose
        warnings.warn(line, stacklevel=1)
    cut = int(len(data) * s.heldout)
    held, train_data = data[:cut], data[cut:]
    total = s.epochs * -(-len(train_data) // (s.batch_size * s.grad_accum))
    bar = tqdm(total=total, initial=progress.sft_step, desc="sft", disable=not cfg.log.progress)
    parallel = DataParallel(model, strategy=cfg.model.parallel)  # before the optimizer: FSDP swaps the parameters
    optimizer = sft_optimizer(model, s.lr)
    if saved is not None and progress.sft_step:
        sharding.load_optimizer_state(model, optimizer, saved.load("optimizer"))
    losses: list[float] = progress.sft_losses
    every = cfg.checkpoint.sft_every
    for step, metrics in sft_steps(model, train_data, s, tokenizer.pad_token_id, cfg.model.precision, optimizer,
                                   progress.sft_step, parallel):
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")
        losses.append(metrics["loss"])
        logger.log({"step": step, "stage": "sft", **metrics, "time_train_s": metrics["time_step_s"]})
        if every and step % every == 0 and step < total:
            progress.sft_step, progress.logger_step = step, logger.global_step
            store.save(f"sft-step{step}", progress, model, optimizer, config=cfg)
    bar.close()
    if held:
        logger.log({"step": len(losses), "stage": "sft_eval", "heldout_loss": sft_loss(
            model, held, tokenizer.pad_token_id, cfg.model.precision), "heldout_examples": len(held)})
    return losses
