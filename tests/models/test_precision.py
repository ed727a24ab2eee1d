"""`precision: auto` follows a measurement, not a CPU flag: on one Xeon with avx512_bf16 a bf16
product ran 5x faster than fp32, on another 1.7x slower."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import precision

CPU = torch.device("cpu")


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
    assert precision.inference_dtype("auto", CPU) == want
    context = precision.autocast("auto", CPU)
    assert isinstance(context, torch.autocast) == (want == torch.bfloat16)
    if want == torch.bfloat16:
        assert context.fast_dtype == torch.bfloat16 and context.device == "cpu"


def test_explicit_precision_is_never_overridden(speedup):
    speedup(0.5)
    assert precision.inference_dtype("bf16", CPU) == torch.bfloat16
    speedup(5.0)
    assert precision.inference_dtype("fp32", CPU) == torch.float32
    with pytest.raises(KeyError, match="unknown precision"):
        precision.inference_dtype("fp16", CPU)


def test_auto_follows_the_device(monkeypatch):
    # CUDA: bf16 where the device supports it, without a probe; a device of another kind: fp32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert precision.inference_dtype("auto", torch.device("cuda", 0)) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert precision.inference_dtype("auto", torch.device("cuda", 0)) == torch.float32
    assert precision.inference_dtype("auto", torch.device("meta")) == torch.float32
    assert precision.autocast("bf16", torch.device("cuda", 0)).device == "cuda"


def test_the_probe_measures_both_dtypes():
    # a real measurement on this machine: positive and finite, whatever the hardware
    ratio = precision._seconds(torch.float32, repeats=1, inner=1) / precision._seconds(torch.bfloat16, 1, 1)
    assert 0 < ratio < float("inf")
