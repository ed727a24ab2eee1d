"""Choose the sampling and autocast dtype: bf16 where it is measured to be faster, fp32 otherwise.

A CPU flag is not enough. Two Intel Xeons with the same `avx512_bf16` flag, both with torch 2.13:
on one a bf16 matrix product ran about 5x faster than fp32, on the other 1.6-1.9x *slower* (bf16
at about 160 GFLOPS against fp32 at 250-310, 64 to 2,048 rows; a held-out evaluation took 81 s in
bf16 against 56 s in fp32, an SFT step 15.5 s against 10). So "auto" on a CPU with native bf16 times
one product of the model's size in both dtypes, once a process, and takes bf16 only when it wins
clearly; a near tie stays fp32, the exact one, so the choice does not flip between runs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextlib import nullcontext

import torch

from agentic_rl.registry import Registry

# bf16 must be at least this much faster than fp32 to be chosen: it costs exactness (sampler and
# trainer disagree by a few thousandths of a nat a token), which a small gain does not pay for.
BF16_MIN_SPEEDUP = 1.25
_PROBE_SHAPE = (256, 576, 1536)  # rows x hidden x MLP width: a SmolLM2-135M projection at a decode/train batch


@functools.cache
def cpu_has_native_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _seconds(dtype: torch.dtype, repeats: int = 5, inner: int = 8) -> float:
    """Best time of `inner` products of _PROBE_SHAPE in `dtype`, over `repeats` tries."""
    m, k, n = _PROBE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(dtype)
    w = torch.randn(n, k, generator=gen).to(dtype)
    for _ in range(2):  # warm-up: kernel selection, page faults
        a @ w.t()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            a @ w.t()
        best = min(best, time.perf_counter() - t0)
    return best


@functools.cache
def cpu_bf16_speedup() -> float:
    """fp32 time / bf16 time of one matrix product on this CPU (0.0 without native bf16). Measured
    once a process, in about 50 ms."""
    if not cpu_has_native_bf16():
        return 0.0
    return _seconds(torch.float32) / _seconds(torch.bfloat16)


def _auto(device: torch.device) -> torch.dtype:
    """bf16 on a CUDA device that supports it, on a CPU where it is measured faster; fp32 elsewhere."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if cpu_bf16_speedup() >= BF16_MIN_SPEEDUP else torch.float32
    return torch.float32


# model.precision -> the dtype it resolves to on a device of this machine
PRECISIONS: Registry[Callable[[torch.device], torch.dtype]] = Registry("precision")
PRECISIONS.register("auto")(_auto)
PRECISIONS.register("bf16")(lambda device: torch.bfloat16)
PRECISIONS.register("fp32")(lambda device: torch.float32)


def inference_dtype(precision: str, device: torch.device) -> torch.dtype:
    """precision: a name in PRECISIONS ("auto" | "bf16" | "fp32"), resolved for the model's device."""
    return PRECISIONS.get(precision)(torch.device(device))


def autocast(precision: str, device: torch.device):
    """The autocast context the trainer runs forward passes in on the model's device (fp32 weights,
    bf16 matmuls); no context at all when the precision is fp32."""
    device = torch.device(device)
    if inference_dtype(precision, device) != torch.bfloat16:
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
