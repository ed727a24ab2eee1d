"""The RL learning-rate schedule (`rl.optim.schedule`, `rl.optim.warmup_steps`).

Each optimizer parameter group keeps its own `base_lr` (the policy's, the critic's); a step sets
`lr = base_lr x factor(step)`. Because `base_lr` lives in the optimizer, its state_dict is the whole
schedule state, and a remedy that halves the learning rate halves `base_lr` and so every later step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from agentic_rl.registry import Registry
from agentic_rl.trainer.config import OptimConfig

# progress through the decay, in [0, 1) -> the multiplier of base_lr
LR_SCHEDULES: Registry[Callable[[float], float]] = Registry("lr schedule")
LR_SCHEDULES.register("constant")(lambda progress: 1.0)
LR_SCHEDULES.register("linear")(lambda progress: 1.0 - progress)
LR_SCHEDULES.register("cosine")(lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)))


def lr_factor(schedule: str, step: int, steps: int, warmup: int) -> float:
    """The multiplier of base_lr at RL step `step` (1-based): linear warmup over `warmup` steps, then
    the schedule over the remaining steps (a decay towards 0 never reaches it)."""
    if step <= warmup:
        return step / warmup
    return LR_SCHEDULES.get(schedule)((step - warmup) / (steps - warmup + 1))


def set_lr(optimizer: torch.optim.Optimizer, optim: OptimConfig, step: int, steps: int) -> None:
    factor = lr_factor(optim.schedule, step, steps, optim.warmup_steps)
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor
