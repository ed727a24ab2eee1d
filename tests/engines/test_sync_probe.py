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


def _one_real_step(model, tokenizer, lr: float = 1e-5) -> None:
    """One AdamW step (the trainer's optimizer, at the recipes' learning rate) on the loss of an answer."""
    from agentic_rl.trainer.sft import adamw

    opt = adamw([p for p in model.parameters() if p.requires_grad], lr)
    ids = torch.tensor([tokenizer("Answer: 2 + 3 + 5 = 10", add_special_tokens=False)["input_ids"]])
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    model.eval()


@pytest.mark.parametrize(("precision", "own_copy"), [("bf16", False), ("fp32", True)])
def test_a_sampler_left_on_the_weights_before_one_real_update_is_caught(precision, own_copy, tiny, tokenizer):
    """One real update at lr 1e-5 moves the greedy logprobs by less than the gap's tolerance; the
    weight checksum catches the sampler that missed it, and passes it once synced."""
    from agentic_rl.engines.probe import SyncProbe

    engine = HFEngine(tiny, tokenizer, precision, own_copy=own_copy)
    probe = SyncProbe.build(engine, tokenizer, precision)
    assert probe.check(engine, tiny) <= probe.tolerance
    _one_real_step(tiny, tokenizer)
    with pytest.raises(WeightSyncError, match=r"version 0 failed its probe: the weights the sampler holds"):
        probe.check(engine, tiny)
    engine.sync_weights()
    assert probe.check(engine, tiny) <= probe.tolerance


def test_our_server_left_on_the_weights_before_one_real_update_is_caught(tiny, tokenizer, tmp_path, monkeypatch):
    """The same through `agentic-rl serve` in bf16 (a real uvicorn): a load the server skips after one
    real update is caught by the checksum it reports, and a real load passes."""
    import copy

    from agentic_rl.engines.probe import SyncProbe
    from agentic_rl.engines.served import ServedEngine
    from agentic_rl.engines.server import BatchingWorker, create_app
    from tests.engines.test_served import Server

    server = Server(create_app(HFEngine(copy.deepcopy(tiny), tokenizer, "bf16"), tokenizer))
    try:
        engine = ServedEngine(server.url, tokenizer, tiny, weights_dir=str(tmp_path))
        probe = SyncProbe.build(engine, tokenizer, "bf16")
        _one_real_step(tiny, tokenizer)
        load = BatchingWorker.load_weights
        monkeypatch.setattr(BatchingWorker, "load_weights", lambda self, path: self.engine.version + 1)
        engine.sync_weights()
        with pytest.raises(WeightSyncError, match=rf"version {engine.version} failed its probe: the weights the"):
            probe.check(engine, tiny)
        monkeypatch.setattr(BatchingWorker, "load_weights", load)
        engine.sync_weights()
        assert probe.check(engine, tiny) <= probe.tolerance
    finally:
        server.stop()


@pytest.mark.parametrize("synced", [False, True])
def test_a_sampler_without_a_checksum_must_follow_the_trainers_update(synced, tiny, tokenizer, tmp_path, monkeypatch):
    """A server that reports no weight checksum (as vLLM): after one real update (the tiny recipe's
    lr, 1e-3) its prompt logprobs must move with the trainer's. A skipped load stays put and is
    caught; a real load follows and passes."""
    import copy

    from agentic_rl.engines import probe as probe_module
    from agentic_rl.engines.served import ServedEngine
    from agentic_rl.engines.server import BatchingWorker, create_app
    from tests.engines.test_served import Server

    monkeypatch.setattr(probe_module, "_sampler_checksum", lambda engine: None)
    server = Server(create_app(HFEngine(copy.deepcopy(tiny), tokenizer, "bf16"), tokenizer))
    try:
        engine = ServedEngine(server.url, tokenizer, tiny, weights_dir=str(tmp_path))
        probe = probe_module.SyncProbe.build(engine, tokenizer, "bf16")
        engine.sync_weights()
        probe.check(engine, tiny)  # the reading the next check compares with
        _one_real_step(tiny, tokenizer, lr=1e-3)
        if not synced:
            monkeypatch.setattr(BatchingWorker, "load_weights", lambda self, path: self.engine.version + 1)
        engine.sync_weights()
        if synced:
            assert probe.check(engine, tiny) <= probe.tolerance
        else:
            with pytest.raises(WeightSyncError, match=rf"version {engine.version} failed its probe: .* moved 0\.00 of"):
                probe.check(engine, tiny)
    finally:
        server.stop()


@pytest.mark.slow
def test_smollm2_in_bf16_left_on_the_weights_before_one_update_at_lr_1e5_is_caught(monkeypatch):
    """The case the gap alone missed: SmolLM2 sampling in bf16, one real update at lr 1e-5. The
    checksum catches the unsynced sampler, and so does the movement check alone (as for vLLM, which
    reports no checksum); both pass it once synced."""
    from agentic_rl.engines import probe as probe_module
    from agentic_rl.models.loader import load_model

    model, tokenizer = load_model("smollm2", device="cpu")
    engine = HFEngine(model, tokenizer, "bf16")
    by_sum, stale_moved, synced_moved = (probe_module.SyncProbe.build(engine, tokenizer, "bf16") for _ in range(3))
    with monkeypatch.context() as m:
        m.setattr(probe_module, "_sampler_checksum", lambda engine: None)
        for probe in (stale_moved, synced_moved):
            probe.check(engine, model)  # the readings before the update
    _one_real_step(model, tokenizer, lr=1e-5)
    with pytest.raises(WeightSyncError, match="the weights the sampler holds"):
        by_sum.check(engine, model)
    with monkeypatch.context() as m:
        m.setattr(probe_module, "_sampler_checksum", lambda engine: None)
        with pytest.raises(WeightSyncError, match=r"moved 0\.00 of the way"):
            stale_moved.check(engine, model)
        engine.sync_weights()
        assert synced_moved.check(engine, model) <= synced_moved.tolerance
        assert synced_moved.moved(engine, model) is None  # the trainer has not moved since: nothing to follow
    assert by_sum.check(engine, model) <= by_sum.tolerance
