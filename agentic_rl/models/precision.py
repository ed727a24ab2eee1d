"""Choose the sampling and autocast dtype: bf16 where it is measured to be faster, fp32 otherwise.

A CPU flag is not enough. Two Intel Xeons with the same `avx512_bf16` flag, both with torch 2.13:
on one a bf16 matrix product ran about 5x faster than fp32, on the other 1.6-1.9x *slower* (bf16
at about 160 GFLOPS against fp32 at 250-310, 64 to 2,048 rows; a held-out evaluation took 81 s in
bf16 against 56 s in fp32, an SFT step 15.5 s against 10). So "auto" on a CPU without native bf16 is
fp32 at once; on one with it, a product of the model's size is timed in both dtypes, the two
interleaved so a load that comes and goes weighs on both alike, and bf16 is taken only when it wins
clearly (a near tie stays fp32, the exact one). A single probe of each, back to back, measured 0.99,
1.28 and 1.40 on one loaded machine, on both sides of the bar; so the choice is measured once per
machine, thread count and torch, and kept (`cache_root()/precision.json`): later runs read it. A run
resolves "auto" at its start and writes the dtype it chose into its config.yaml (`trainer/loop.py`).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from agentic_rl.registry import Registry

# bf16 must be at least this much faster than fp32 to be chosen: it costs exactness (sampler and
# trainer disagree by a few thousandths of a nat a token), which a small gain does not pay for.
BF16_MIN_SPEEDUP = 1.25
_PROBE_SHAPE = (256, 576, 1536)  # rows x hidden x MLP width: a SmolLM2-135M projection at a decode/train batch


def _cpu_info() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


@functools.cache
def cpu_has_native_bf16() -> bool:
    flags = _cpu_info()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _products(dtype: torch.dtype, a: torch.Tensor, w: torch.Tensor, inner: int) -> float:
    a, w = a.to(dtype), w.to(dtype)
    t0 = time.perf_counter()
    for _ in range(inner):
        a @ w.t()
    return time.perf_counter() - t0


def measure_bf16_speedup(rounds: int = 7, inner: int = 8) -> float:
    """fp32 time / bf16 time of `inner` products of _PROBE_SHAPE: the best of `rounds` for each
    dtype, the two dtypes taking turns round by round."""
    m, k, n = _PROBE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a, w = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    for dtype in (torch.float32, torch.bfloat16):  # warm-up: kernel selection, page faults
        _products(dtype, a, w, 2)
    best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
    for _ in range(rounds):
        for dtype in best:
            best[dtype] = min(best[dtype], _products(dtype, a, w, inner))
    return best[torch.float32] / best[torch.bfloat16]


@dataclass(frozen=True)
class CPUChoice:
    """What "auto" means on this CPU: bf16 or not, the speed-up measured, and where it came from."""

    bf16: bool
    speedup: float  # fp32 time / bf16 time; 0.0 without native bf16
    source: str  # "no native bf16" | "measured" | "cached"


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it ("unknown cpu" where it gives none)."""
    return next((line.split(":", 1)[1].strip() for line in _cpu_info().splitlines() if line.startswith("model name")),
                "unknown cpu")


def _machine_key() -> str:
    return f"{cpu_model()} | {torch.get_num_threads()} threads | torch {torch.__version__}"


def _cache_file() -> Path:
    from agentic_rl.models.loader import cache_root

    return cache_root() / "precision.json"


@functools.cache
def cpu_choice() -> CPUChoice:
    """"auto" on this CPU, measured once per machine key and then read back (see the module doc)."""
    if not cpu_has_native_bf16():
        return CPUChoice(False, 0.0, "no native bf16")
    path, key = _cache_file(), _machine_key()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), (int, float)):
        speedup = float(known[key])
        return CPUChoice(speedup >= BF16_MIN_SPEEDUP, speedup, "cached")
    speedup = measure_bf16_speedup()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**known, key: round(speedup, 3)}, indent=1))
    except OSError:
        pass  # a read-only home: measured again next run
    return CPUChoice(speedup >= BF16_MIN_SPEEDUP, speedup, "measured")


def cpu_bf16_speedup() -> float:
    """fp32 time / bf16 time of one matrix product on this CPU (0.0 without native bf16)."""
    return cpu_choice().speedup


def _auto(device: torch.device) -> torch.dtype:
    """bf16 on a CUDA device that supports it, on a CPU where it is measured faster; fp32 elsewhere."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if cpu_choice().bf16 else torch.float32
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


def resolve(precision: str, device: torch.device) -> str:
    """`model.precision` as the run will use it: "bf16" or "fp32" ("auto" decided for `device`)."""
    return "bf16" if inference_dtype(precision, device) == torch.bfloat16 else "fp32"


def describe(precision: str, device: torch.device) -> str:
    """For the startup line: the dtype, and for "auto" on a CPU why it is that one."""
    chosen = resolve(precision, device)
    if precision != "auto" or torch.device(device).type != "cpu":
        return chosen if precision != "auto" else f"{chosen} (auto)"
    c = cpu_choice()
    if c.source == "no native bf16":
        return f"{chosen} (auto: no native bf16)"
    return f"{chosen} (auto: bf16 {c.speedup:.2f}x fp32, {c.source}; bf16 needs {BF16_MIN_SPEEDUP}x)"
