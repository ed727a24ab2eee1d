"""State store: retention (keep-last-N plus best-by-metric) and the file cut a resume makes."""

from __future__ import annotations

import dataclasses

import torch

from agentic_rl.trainer.config import CheckpointConfig
from agentic_rl.trainer.state import Progress, StateStore


def _save(store, metrics):
    model = torch.nn.Linear(2, 2)
    for m in metrics:
        store.save("rl", Progress(metric=m), model)
    return [p.name for p in store.states()]


def test_keeps_the_last_n_and_the_best(tmp_path):
    store = StateStore(tmp_path, CheckpointConfig(keep_last=2, best_metric="reward_mean", best_mode="max"))
    assert _save(store, [0.1, 0.9, 0.3, 0.2, 0.4]) == ["0002-rl", "0004-rl", "0005-rl"]


def test_best_mode_min_and_keep_all(tmp_path):
    store = StateStore(tmp_path / "a", CheckpointConfig(keep_last=1, best_metric="kl", best_mode="min"))
    assert _save(store, [0.5, 0.1, 0.3]) == ["0002-rl", "0003-rl"]
    store = StateStore(tmp_path / "b", CheckpointConfig(keep_last=0))
    assert len(_save(store, [None] * 4)) == 4


def test_resume_cuts_logs_back_to_the_state(tmp_path):
    """Lines written after the state are dropped (the resumed run writes them again); a trajectory
    file created after the state is removed."""
    store = StateStore(tmp_path, CheckpointConfig())
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "trajectories").mkdir()
    (tmp_path / "trajectories" / "rl.jsonl").write_text("a\n")
    store.save("rl-step1", Progress(rl_step=1))
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (tmp_path / "trajectories" / "rl.jsonl").write_text("a\nb\n")
    (tmp_path / "trajectories" / "eval.jsonl").write_text("x\n")
    saved = StateStore(tmp_path, CheckpointConfig()).open("auto")
    assert saved.progress.rl_step == 1 and dataclasses.is_dataclass(saved.progress)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert (tmp_path / "trajectories" / "rl.jsonl").read_text() == "a\n"
    assert not (tmp_path / "trajectories" / "eval.jsonl").exists()


def test_a_fresh_start_clears_an_earlier_run(tmp_path):
    store = StateStore(tmp_path, CheckpointConfig())
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    store.save("rl-step1", Progress(rl_step=1))
    assert StateStore(tmp_path, CheckpointConfig()).open(None) is None
    assert not (tmp_path / "metrics.jsonl").exists() and not store.states()
