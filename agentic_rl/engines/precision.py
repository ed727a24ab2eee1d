"""Choose the sampling dtype: bf16 where the hardware runs it natively, fp32 otherwise."""

from __future__ import annotations

import functools

import torch


@functools.cache
def cpu_has_native_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def inference_dtype(precision: str) -> torch.dtype:
    """precision: "auto" | "bf16" | "fp32"."""
    if precision == "fp32":
        return torch.float32
    if precision == "bf16":
        return torch.bfloat16
    if precision != "auto":
        raise ValueError(f"precision must be auto, bf16 or fp32, not {precision!r}")
    if torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def autocast(precision: str, device: str = "cpu"):
    """The autocast context the trainer runs forward passes in (fp32 weights, bf16 matmuls)."""
    dtype = inference_dtype(precision)
    return torch.autocast(device, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16)
