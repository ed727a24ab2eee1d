"""`precision: auto` follows a measurement, not a CPU flag: on one Xeon with avx512_bf16 a bf16
product ran 5x faster than fp32, on another 1.7x slower."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import precision


@pytest.fixture
def speedup(monkeypatch):
    def set_speedup(value: float) -> None:
        monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: value)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    return set_speedup


@pytest.mark.parametrize(("measured", "want"), [
    (0.0, torch.float32),  # no native bf16
    (0.6, torch.float32),  # bf16 slower (an Intel Xeon measured on 2026-11-25)
    (1.2, torch.float32),  # a near tie keeps the exact dtype
    (5.0, torch.bfloat16),
])
def test_auto_takes_bf16_only_when_measured_clearly_faster(speedup, measured, want):
    speedup(measured)
    assert precision.inference_dtype("auto") == want
    assert precision.autocast("auto").fast_dtype == torch.bfloat16
    assert precision.autocast("auto")._enabled == (want == torch.bfloat16)


def test_explicit_precision_is_never_overridden(speedup):
    speedup(0.5)
    assert precision.inference_dtype("bf16") == torch.bfloat16
    speedup(5.0)
    assert precision.inference_dtype("fp32") == torch.float32
    with pytest.raises(KeyError, match="unknown precision"):
        precision.inference_dtype("fp16")


def test_the_probe_measures_both_dtypes():
    # a real measurement on this machine: positive and finite, whatever the hardware
    ratio = precision._seconds(torch.float32, repeats=1, inner=1) / precision._seconds(torch.bfloat16, 1, 1)
    assert 0 < ratio < float("inf")
