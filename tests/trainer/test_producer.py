"""Rollouts produced while the update runs (`trainer/producer.py`, `rl.max_staleness`).

That k = 0 is the synchronous loop byte for byte is the behaviour guard's (tests/test_behaviour_guard.py):
its references were recorded before the producer existed, and every RL run now goes through it.
Here, on the tiny recipe (fp32, one thread): at k = 1 and 2 each batch is exactly as stale as the
schedule says and the run is reproducible; rollouts do overlap updates; and no episode is sampled by
two weight versions even when a sync is asked for while a batch is being produced."""

from __future__ import annotations

import json
import time

import pytest

from agentic_rl.engines.hf import HFSession
from agentic_rl.trainer import update
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train

BASE = ["rl.steps=4", "log.progress=false", "log.tensorboard=false", "eval.baselines=false",
        "eval.tasks_per_split=2", "rl.algorithm.entropy_coef=0.01", "rl.tasks.sampler=pass_rate"]
VOLATILE = ("time_", "tokens_per_s", "mem_")


def _run(out, *overrides) -> list[dict]:
    train(load_config("recipes/tiny.yaml", [*BASE, *overrides, f"output_dir={out}"]))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


def _steps(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("stage") == "rl" and "weight_version" in r]


@pytest.mark.parametrize("k, staleness", [(1, [0, 1, 1, 1]), (2, [0, 1, 2, 2])])
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
    from agentic_rl.trainer import rl_loop

    batches, updates, sessions = [], [], []
    run, collect, rl_update = HFSession.run, rl_loop.collect, update.rl_update

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
    monkeypatch.setattr(rl_loop, "collect", timed(collect, batches))
    monkeypatch.setattr("agentic_rl.trainer.rl_step.rl_update", timed(rl_update, updates))
    return batches, updates, sessions


def _overlaps(batches, updates) -> list:
    return [(a, b) for a, b in batches if any(u0 < b and a < u1 for u0, u1 in updates)]


def test_rollouts_overlap_updates_and_never_mix_versions(tmp_path, monkeypatch):
    batches, updates, sessions = _record_intervals(monkeypatch)
    _run(tmp_path, "rl.max_staleness=1")
    assert len(batches) == len(updates) == 4
    assert sessions and all(v0 == v1 for v0, v1 in sessions)  # one version from a session's start to its end
    assert _overlaps(batches, updates)  # some batch was rolled out while an update ran


def test_k0_never_overlaps(tmp_path, monkeypatch):
    """The synchronous loop: no rollout runs while an update does."""
    batches, updates, _ = _record_intervals(monkeypatch)
    _run(tmp_path)
    assert len(batches) == len(updates) == 4 and not _overlaps(batches, updates)


def test_a_rollback_discards_the_batches_ahead_and_produces_them_again(tmp_path, monkeypatch):
    """A rollback after step 2 (k = 1) changes the weights out of turn: step 3's batch, sampled by
    step 1's weights, would train two versions stale. It is dropped and produced again from the
    same tasks by the restored weights, and the run goes on within the bound."""
    from agentic_rl.monitor.collapse import CollapseMonitor
    from agentic_rl.trainer import rl_loop

    monkeypatch.setattr(CollapseMonitor, "update", lambda self, row: (
        {"event": "collapse_warning", "evidence": {}} if row["step"] == 2 else None))
    tasks, collect = [], rl_loop.collect

    def recording(run, seed):
        kept, sampled, stats = collect(run, seed)
        tasks.append([g.task.id for g in sampled])
        return kept, sampled, stats
    monkeypatch.setattr(rl_loop, "collect", recording)
    rows = _run(tmp_path, "rl.max_staleness=1", "rl.collapse.actions=[rollback]")
    assert [r["staleness"] for r in _steps(rows)] == [0, 1, 0, 1]
    assert len(tasks) == 5 and tasks[3] == tasks[2]  # step 3's batch, produced twice from the same tasks
    assert any(r.get("event") == "remediation" and r.get("action") == "rollback" for r in rows)
