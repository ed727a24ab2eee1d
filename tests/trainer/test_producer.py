"""Rollouts produced while the update runs (`trainer/producer.py`, `rl.max_staleness`).

That k = 0 is the synchronous loop byte for byte is the behaviour guard's (tests/test_behaviour_guard.py):
its references were recorded before the producer existed, and every RL run now goes through it.
Here, on the tiny recipe (fp32, one thread): at k = 1 and 2 each batch is exactly as stale as the
schedule says and the run is reproducible; rollouts do overlap updates; and no episode is sampled by
two weight versions even when a sync is asked for while a batch is being produced."""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
import warnings

import pytest

from agentic_rl.engines.hf import HFSession
from agentic_rl.monitor.metrics import MACHINE_PREFIXES
from agentic_rl.trainer import update
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train

BASE = ["rl.steps=4", "log.progress=false", "log.tensorboard=false", "eval.baselines=false",
        "eval.tasks_per_split=2", "rl.algorithm.entropy_coef=0.01", "rl.tasks.sampler=pass_rate"]
VOLATILE = MACHINE_PREFIXES


def _run(out, *overrides) -> list[dict]:
    train(load_config("recipes/tiny.yaml", [*BASE, *overrides, f"output_dir={out}"]))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


def _steps(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("stage") == "rl" and "weight_version" in r]


@pytest.mark.parametrize("k, staleness", [(1, [0, 1, 1, 1]), pytest.param(2, [0, 1, 2, 2], marks=pytest.mark.slow)])
def test_each_batch_is_as_stale_as_the_schedule_says_and_the_run_reproduces(k, staleness, tmp_path):
    """Batch s is sampled by step s-1-k's weights (the first ones by the weights RL starts from), so
    its staleness is min(s - 1, k); two runs are identical, trajectories included."""
    a = _run(tmp_path / "a", f"rl.max_staleness={k}")
    b = _run(tmp_path / "b", f"rl.max_staleness={k}")
    assert [r["staleness"] for r in _steps(a)] == staleness
    assert a == b
    assert (tmp_path / "a/trajectories/rl.jsonl").read_bytes() == (tmp_path / "b/trajectories/rl.jsonl").read_bytes()


def _record_intervals(monkeypatch):
    """(start, end) of every batch's production and of every update by wall clock, and every
    rollout session's weight version at its start and at its end; rollouts slowed a little so an
    update has time to run beside one."""
    from agentic_rl.trainer import producer

    batches, updates, sessions = [], [], []
    run, collect, rl_update = HFSession.run, producer.collect, update.rl_update

    def slow_run(self, prompts, params, on_stop, *args, **kwargs):
        def stop(row, sample):
            time.sleep(0.01)
            return on_stop(row, sample)
        v0 = self.engine.version
        out = run(self, prompts, params, stop, *args, **kwargs)
        sessions.append((v0, self.engine.version))
        return out

    def timed(fn, into):
        def wrapped(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            into.append((t0, time.perf_counter()))
            return out
        return wrapped
    monkeypatch.setattr(HFSession, "run", slow_run)
    monkeypatch.setattr(producer, "collect", timed(collect, batches))
    monkeypatch.setattr("agentic_rl.trainer.rl_step.rl_update", timed(rl_update, updates))
    return batches, updates, sessions


def _overlaps(batches, updates) -> list:
    return [(a, b) for a, b in batches if any(u0 < b and a < u1 for u0, u1 in updates)]


def test_rollouts_overlap_updates_and_never_mix_versions(tmp_path, monkeypatch):
    """At k = 1 some batch is rolled out while an update runs, and no rollout session sees two weight
    versions, even with a sync forced into the middle of a batch: step 2's sync skips its wait for
    batch 3 (`before_sync`) and goes ahead once batch 3's first action is sampled, and that session
    then waits up to 1 s for the sync before it goes on. The engine lock holds the sync until the
    batch is over, so the session ends on the version it started with; without the lock the sync
    lands inside it."""
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.trainer import producer
    from agentic_rl.trainer.producer import Producer

    batches, updates, sessions = _record_intervals(monkeypatch)
    calls, mid_batch, sync_asked, synced = [], threading.Event(), threading.Event(), threading.Event()
    collect, session_run, before_sync, sync_weights = producer.collect, HFSession.run, Producer.before_sync, \
        HFEngine.sync_weights

    def counted(run, seed):
        calls.append(seed)  # the n-th batch is step n's: no rollback here
        return collect(run, seed)

    def forcing_run(self, prompts, params, on_stop, *args, **kwargs):
        def stop(row, sample):
            if len(calls) == 3 and not mid_batch.is_set():  # batch 3, its first action sampled
                mid_batch.set()
                assert sync_asked.wait(30)  # the trainer is at step 2's sync
                synced.wait(1.0)  # held by the engine lock: times out
            return on_stop(row, sample)
        return session_run(self, prompts, params, stop, *args, **kwargs)

    def forced_before_sync(self, step):
        if step != 2:
            return before_sync(self, step)
        sync_asked.set()
        assert mid_batch.wait(30)

    def recorded_sync(self):
        out = sync_weights(self)
        if mid_batch.is_set():
            synced.set()
        return out
    monkeypatch.setattr(producer, "collect", counted)
    monkeypatch.setattr(HFSession, "run", forcing_run)
    monkeypatch.setattr(Producer, "before_sync", forced_before_sync)
    monkeypatch.setattr(HFEngine, "sync_weights", recorded_sync)
    rows = _run(tmp_path, "rl.max_staleness=1")
    assert len(batches) == len(updates) == 4 and mid_batch.is_set() and synced.is_set()
    assert sessions and all(v0 == v1 for v0, v1 in sessions)  # one version from a session's start to its end
    assert [r["staleness"] for r in _steps(rows)] == [0, 1, 1, 1]  # batch 3 wholly step 1's
    assert _overlaps(batches, updates)  # some batch was rolled out while an update ran


def test_k0_never_overlaps(tmp_path, monkeypatch):
    """The synchronous loop: no rollout runs while an update does."""
    batches, updates, _ = _record_intervals(monkeypatch)
    _run(tmp_path)
    assert len(batches) == len(updates) == 4 and not _overlaps(batches, updates)


def _within(seconds: float, fn):
    """fn() on a thread of its own, failed with the threads' stacks if it has not returned in time."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - raised again on the test's thread
            out["error"] = e
    t = threading.Thread(target=target, name="test-run", daemon=True)  # a hung run must not keep pytest alive
    t.start()
    t.join(seconds)
    if t.is_alive():
        stacks = {th.name: "".join(traceback.format_stack(sys._current_frames()[th.ident]))
                  for th in threading.enumerate() if th.ident in sys._current_frames()}
        pytest.fail(f"the run hung (over {seconds} s):\n" + "\n".join(f"--- {n}\n{s}" for n, s in stacks.items()))
    if "error" in out:
        raise out["error"]
    return out["value"]


# A run cut to what a rollback needs (no SFT, short actions, groups of 2): ~4 s here, ~8 s with the
# cores shared. 60 s is far beyond that spread and short enough that a hang fails the suite rather
# than stalling it.
HANG_S = 60.0
SHORT = ("sft.examples=0", "rollout.max_new_tokens=8", "rl.tasks.group_size=2", "eval.tasks_per_split=1")


@pytest.mark.parametrize("k, at", [(k, at) for k in (1, 2) for at in (2, 3, 4)])
def test_a_rollback_discards_the_batches_ahead_and_produces_them_again(tmp_path, monkeypatch, k, at):
    """A rollback after step `at` changes the weights out of turn: the batches already produced for
    the steps after it (up to k of them), sampled by the weights rolled back from, would train too
    stale. They are dropped and produced again from the same tasks by the restored weights, and the
    run goes on within the bound to its last step, wherever the rollback falls (at the last k steps
    the producer has made every batch it was going to). Step 1 is no position: a rollback returns
    to the last quiet step, and there is none before it.

    The schedule restarts from the rollback: batch s > at is sampled by the weights of step
    max(s - 1 - k, at), one sync later than the plain schedule's for the rollback's own sync, so
    its staleness is min(s - 1 - at, k); before it, min(s - 1, k). Nothing is produced again before
    step `at` is over (`synced`): its checkpoint must find the producer idle."""
    from agentic_rl.monitor.collapse import CollapseMonitor
    from agentic_rl.trainer import producer
    from agentic_rl.trainer.producer import Producer

    monkeypatch.setattr(CollapseMonitor, "update", lambda self, row: (
        {"event": "collapse_warning", "evidence": {}} if row.step == at else None))
    tasks, order, collect, synced = [], [], producer.collect, Producer.synced

    def recording(run, seed):
        order.append(("batch", seed))
        kept, sampled, stats = collect(run, seed)
        tasks.append((seed, [g.task.id for g in sampled]))
        return kept, sampled, stats

    def recording_synced(self, step):
        order.append(("synced", step))
        return synced(self, step)
    monkeypatch.setattr(producer, "collect", recording)
    monkeypatch.setattr(Producer, "synced", recording_synced)
    rows = _within(HANG_S, lambda: _run(tmp_path, f"rl.max_staleness={k}", "rl.collapse.actions=[rollback]", *SHORT))
    want = [min(s - 1, k) if s <= at else min(s - 1 - at, k) for s in range(1, 5)]
    assert [r["staleness"] for r in _steps(rows)] == want
    assert [r["step"] for r in rows if r.get("action") == "rollback"] == [at]
    again = range(at + 1, min(at + k, 4) + 1)  # the batches that were ahead: produced twice
    seeds = [seed for seed, _ in tasks]
    assert len(tasks) == 4 + len(again)
    for s in again:
        first, second = (i for i, seed in enumerate(seeds) if seed == seeds[s - 1])
        assert tasks[first] == tasks[second]  # the same step's seed and the same tasks
    if len(again):
        redone = [i for i, e in enumerate(order) if e == ("batch", seeds[at])][1]  # step at + 1's second batch
        assert order.index(("synced", at)) < redone


def test_stale_batches_without_the_rollout_correction_are_warned_at_the_recipe_check():
    """k > 0 with rl.rollout_correction.mode: none trains stale batches uncorrected: the recipe check
    warns (the run is allowed). Either alone is quiet: k = 0 has nothing stale, and the default
    correction corrects."""
    def warned(*overrides) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_config(load_config("recipes/tiny.yaml", list(overrides)))
        return [str(w.message) for w in caught if "rl.max_staleness" in str(w.message)]
    assert len(warned("rl.max_staleness=2", "rl.rollout_correction.mode=none")) == 1
    assert "2 versions stale" in warned("rl.max_staleness=2", "rl.rollout_correction.mode=none")[0]
    assert warned("rl.max_staleness=2") == warned("rl.rollout_correction.mode=none") == []


def test_a_geo_mask_band_too_narrow_for_stale_batches_is_warned():
    """geo_mask's default band (0.001) drops a sequence whose mean log-weight leaves +-0.001, where a
    batch one version stale is off by ~0.014 nats a token: at k > 0 the check warns; a wide band, or
    k = 0, is quiet."""
    def warned(*overrides) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_config(load_config("recipes/tiny.yaml", list(overrides)))
        return [str(w.message) for w in caught if "geo_band" in str(w.message)]
    assert len(warned("rl.max_staleness=1", "rl.rollout_correction.mode=geo_mask")) == 1
    assert warned("rl.max_staleness=1", "rl.rollout_correction.mode=geo_mask", "rl.rollout_correction.geo_band=0.1") == []
    assert warned("rl.rollout_correction.mode=geo_mask") == warned("rl.max_staleness=1") == []
