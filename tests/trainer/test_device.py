"""Everything follows the model's device. No accelerator is reachable here, so the tiny recipes run
on `guard`, a stand-in device (`tests/device_guard.py`) whose tensors compute on the CPU but refuse
what an accelerator refuses: an operation mixing them with CPU tensors, a CPU generator driving
them. A tensor made without the model's device, or with a "cpu" literal where the model's device is
meant, fails the run. And since the arithmetic is the CPU's, a run on `guard` must train as the
same run on the CPU: through the first RL step, the same tokens sampled and every logged figure
within the tolerance below. (Not bit for bit: torch picks some kernels by device type and the
stand-in gets the generic ones, whose gradients differ in the last bits; Adam turns that into
differences that grow over the steps, so later steps are only required to run.)
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from agentic_rl.types import Batch
from tests.device_guard import DeviceMixError, guard_device, on_guard_device
from tests.guard import CASES, run_case

# The two devices' kernels differ in the last bits of a gradient, and Adam does not keep that in the
# last bits: it divides each gradient by its own running magnitude, so a component that is rounding
# noise moves its weight by up to lr either way. Every figure of RL step 1 is logged after optimizer
# steps (SFT's, and the step's own minibatches), so it carries that amplified difference: measured up
# to 3.7e-4 relative (engine_logprob_abs_diff of tiny_kl_entropy on an Intel Xeon with AMX, 3 runs of
# 3) and 1.3e-4 (its kl and grad_norm on an AMD EPYC). REL_TOL is five times the largest. A figure
# that is itself rounding (the fp32 sampler-trainer gap, ~1e-7 nats, beside logprobs near -11 whose
# ulp is 9.5e-7) is compared absolutely, within two such ulps. A tensor or generator on the wrong
# device changes the sampled tokens, which are compared exactly.
REL_TOL, ABS_TOL = 2e-3, 2e-6


def _close(a, b) -> bool:
    """Equal, with numbers equal within REL_TOL / ABS_TOL."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def _first_rl_step(text: str) -> list:
    """The records up to and including the first RL step's (SFT, baselines, step 1)."""
    records = [json.loads(line) for line in text.splitlines()]
    rl = [r for r in records if r.get("stage", "rl") == "rl"]  # a trajectory record has no stage
    return [r for r in records if r not in rl or r.get("step") == rl[0].get("step")]


def _on(device: str, name: str, out):
    recipe, overrides = CASES[name]
    CASES[name] = (recipe, [*overrides, f"model.device={device}"])
    try:
        return run_case(name, out)
    finally:
        CASES[name] = (recipe, overrides)


# make test: the plain recipe and the one whose figures moved most between devices (engine_logprob_abs_diff);
# the other cases in make test-slow
@pytest.mark.parametrize("name", ["tiny_kl_entropy", *(pytest.param(n, marks=pytest.mark.slow)
                                                      for n in ("tiny", "tiny_gae", "tiny_hindsight", "tiny_lora_opd"))])
def test_a_run_on_another_device_trains_as_on_the_cpu(name, tmp_path):
    cpu = _on("cpu", name, tmp_path / "cpu")
    with on_guard_device():
        guarded = _on("guard:0", name, tmp_path / "guard")
    assert sorted(guarded) == sorted(cpu)
    assert len(guarded["metrics.jsonl"].splitlines()) == len(cpu["metrics.jsonl"].splitlines())
    for file in [f for f in sorted(cpu) if f.endswith(".jsonl")]:
        want, got = _first_rl_step(cpu[file]), _first_rl_step(guarded[file])
        assert len(got) == len(want), file
        for i, (w, g) in enumerate(zip(want, got)):
            bad = {k: (w.get(k), g.get(k)) for k in w.keys() | g.keys() if not _close(w.get(k), g.get(k))}
            assert not bad, f"{file} record {i + 1}: (cpu, guard) {bad}"


def test_the_guard_catches_a_batch_left_on_the_host(tmp_path, monkeypatch):
    # what a forgotten `.to(device)` (or a "cpu" literal) does: the batch stays in host memory
    monkeypatch.setattr(Batch, "to", lambda self, device: self)
    with on_guard_device(), pytest.raises(DeviceMixError, match="mixes guard tensors with CPU tensors"):
        _on("guard:0", "tiny", tmp_path / "guard")


def test_the_guard_refuses_what_an_accelerator_refuses():
    with on_guard_device():
        x = torch.ones(2, 3, device=guard_device())
        with pytest.raises(DeviceMixError):
            x + torch.ones(2, 3)  # a CPU tensor of more than one element
        assert (x + torch.tensor(2.0)).device == guard_device()  # a CPU scalar is allowed, as on CUDA
        assert x[torch.tensor([1])].device == guard_device()  # and CPU indices
        with pytest.raises(DeviceMixError, match="generator"):
            torch.rand(2, 3, device=guard_device()).bernoulli_(generator=torch.Generator())
        assert x.cpu().device.type == "cpu" and x.sum().item() == 6.0
