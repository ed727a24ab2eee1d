"""The probe after every weight sync (`engines/probe.py`): a healthy sync passes with a gap far
inside the tolerance, and each way a sync goes wrong — skipped, half written, written in the wrong
dtype — stops the run at the next check with a message naming the version. The tiny recipe in
bf16 (so the sampler has a copy of its own to get wrong), with learning rates large enough that
an update moves the distribution well past bf16's noise."""

from __future__ import annotations

import json

import pytest
import torch

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.probe import WeightSyncError
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train

BASE = ["model.precision=bf16", "log.progress=false", "log.tensorboard=false", "eval.baselines=false",
        "eval.tasks_per_split=4", "sft.lr=1e-2"]


def _run(tmp_path, *overrides):
    train(load_config("recipes/tiny.yaml", [*BASE, *overrides, f"output_dir={tmp_path}"]))
    return [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def skipped(engine):
    pass


def half_written(engine):
    with torch.no_grad():
        src = dict(engine.model.named_parameters())
        for i, (name, p) in enumerate(engine._infer.named_parameters()):
            if i % 2 == 0:
                p.copy_(src[name])


def wrong_dtype(engine):  # fp16 bits read as bf16: a classic of hand-written weight transfers
    with torch.no_grad():
        src = dict(engine.model.named_parameters())
        for name, p in engine._infer.named_parameters():
            p.copy_(src[name].to(torch.float16).view(torch.bfloat16))


def _broken(monkeypatch, write, after: int = 0):
    """HFEngine.sync_weights writing with `write` from its (after + 1)-th call on."""
    real, calls = HFEngine.sync_weights, []

    def sync(self):
        calls.append(1)
        if len(calls) <= after:
            return real(self)
        write(self)
        self.version += 1
        return self.version
    monkeypatch.setattr(HFEngine, "sync_weights", sync)


def test_a_healthy_sync_passes_its_probe(tmp_path):
    rows = [r for r in _run(tmp_path) if r.get("stage") == "rl"]
    assert rows and all(0 <= r["sync_probe_gap"] < 0.01 for r in rows)  # tolerance 0.1 in bf16


@pytest.mark.parametrize("write", [skipped, half_written, wrong_dtype])
def test_a_broken_sync_stops_the_run_at_the_next_check(write, tmp_path, monkeypatch):
    _broken(monkeypatch, write)
    with pytest.raises(WeightSyncError, match=r"weight sync to version 1 failed its probe.*tolerance 0\.1"):
        _run(tmp_path)


def test_a_sync_skipped_after_an_rl_update_is_caught_at_that_step(tmp_path, monkeypatch):
    _broken(monkeypatch, skipped, after=1)  # the sync after SFT works, the first RL step's does not
    with pytest.raises(WeightSyncError, match="version 2"):
        _run(tmp_path, "rl.optim.lr=1e-2", "rl.algorithm.entropy_coef=0.1")
