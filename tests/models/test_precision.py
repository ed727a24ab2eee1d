"""`precision: auto` follows a measurement, not a CPU flag: on one Xeon with avx512_bf16 a bf16
product ran 5x faster than fp32, on another 1.7x slower. The measurement is made once per machine
and kept, so the choice does not flip between runs."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import precision

CPU = torch.device("cpu")


@pytest.fixture
def speedup(monkeypatch):
    def set_speedup(value: float) -> None:
        choice = precision.CPUChoice(value >= precision.BF16_MIN_SPEEDUP, value, "measured")
        monkeypatch.setattr(precision, "cpu_choice", lambda: choice)
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
    assert 0 < precision.measure_bf16_speedup(rounds=1, inner=1) < float("inf")


def test_the_probe_interleaves_the_dtypes(monkeypatch):
    # a load that comes and goes must weigh on both dtypes alike: they take turns, round by round
    order = []
    monkeypatch.setattr(precision, "_products", lambda dtype, a, w, inner: order.append(dtype) or 1.0)
    precision.measure_bf16_speedup(rounds=3)
    assert order[2:] == [torch.float32, torch.bfloat16] * 3  # after one warm-up of each


def test_the_choice_is_measured_once_per_machine_and_then_read_back(monkeypatch, tmp_path):
    """A second run on the machine reads the first run's measurement instead of probing again, so a
    probe that would now read 0.9 on a loaded machine does not flip the dtype."""
    readings = iter([1.4, 0.9, 1.0])
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(precision, "measure_bf16_speedup", lambda: next(readings))
    monkeypatch.setattr(precision, "_cache_file", lambda: tmp_path / "precision.json")
    precision.cpu_choice.cache_clear()
    try:
        first = precision.cpu_choice()
        precision.cpu_choice.cache_clear()  # a new process
        second = precision.cpu_choice()
    finally:
        precision.cpu_choice.cache_clear()
    assert (first.bf16, first.source) == (True, "measured")
    assert (second.bf16, second.speedup, second.source) == (True, 1.4, "cached")
    assert next(readings) == 0.9  # never asked for
    monkeypatch.setattr(precision, "_machine_key", lambda: "another cpu | 1 threads | torch x")
    assert precision.cpu_choice().source == "measured"  # another machine key measures for itself
    precision.cpu_choice.cache_clear()
