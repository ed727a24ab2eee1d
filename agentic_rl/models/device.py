"""Where the model runs: `model.device` (auto | cpu | cuda | cuda:N | any torch device name).

Everything that computes with the model follows the device of its parameters (`device_of`): the
batches are built on the host and moved once, caches and masks are made where the model is, and
autocast and the precision choice ask the same device. Only what is meant for the host says "cpu":
checkpoints, logs, the sampler's random draws (one CPU stream, so a seed samples the same tokens on
every device given the same logits).
"""

from __future__ import annotations

import torch

from agentic_rl.errors import UserError


def resolve_device(name: str) -> torch.device:
    """"auto" = the current CUDA device when there is one (the first; under torchrun, the rank's
    LOCAL_RANK), else the CPU; anything else as torch reads it."""
    if name == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"model.device: {name!r} asks for CUDA, which this machine does not have "
                         "(torch.cuda.is_available() is False); use auto or cpu")
    return device


def device_of(module: torch.nn.Module) -> torch.device:
    """The device of the module's parameters (the CPU for a module without any)."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")
