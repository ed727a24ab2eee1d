"""State store: retention (keep-last-N plus best-by-metric) and the file cut a resume makes."""

from __future__ import annotations

import dataclasses

import pytest
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


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3, bias=False)
        self.b = torch.nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight


def test_an_asynchronous_state_holds_the_values_at_save_time(tmp_path):
    """Training goes on while the writer thread writes: weights and optimizer moments changed in
    place right after `save` returns must not reach the file. The written state equals a synchronous
    one, tied weights still one storage."""
    model = _Tied()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model.a.weight.sum().backward()
    optimizer.step()
    expect = {k: v.clone() for k, v in model.state_dict().items()}
    moment = optimizer.state_dict()["state"][0]["exp_avg"].clone()
    store = StateStore(tmp_path / "async", CheckpointConfig(async_save=True))
    path = store.save("rl-step1", Progress(rl_step=1), model, optimizer, extras={"note": [1, 2]})
    with torch.no_grad():
        model.a.weight.add_(100.0)
    optimizer.state[model.a.weight]["exp_avg"].add_(100.0)
    store.wait()
    sync = StateStore(tmp_path / "sync", CheckpointConfig(async_save=False))
    sync_path = sync.save("rl-step1", Progress(rl_step=1), _tied_like(expect), None, extras={"note": [1, 2]})
    saved = torch.load(path / "model.pt")
    assert saved.keys() == expect.keys() and all(torch.equal(saved[k], expect[k]) for k in expect)
    assert saved["a.weight"].data_ptr() == saved["b.weight"].data_ptr()
    assert torch.equal(torch.load(path / "optimizer.pt")["state"][0]["exp_avg"], moment)
    in_place = torch.load(sync_path / "model.pt")
    assert all(torch.equal(saved[k], in_place[k]) for k in in_place)
    assert torch.load(path / "extras.pt", weights_only=False)["note"] == [1, 2]
    assert [p.name for p in store.states()] == ["0001-rl-step1"]


def _tied_like(state: dict) -> _Tied:
    model = _Tied()
    model.load_state_dict(state)
    return model


def test_a_failed_background_write_is_raised_and_leaves_no_state(tmp_path):
    """A writer that fails (here: an extra that cannot be pickled) must not pass silently: the next
    wait raises, and no half-written state is left as a whole one."""
    store = StateStore(tmp_path, CheckpointConfig(async_save=True))
    store.save("rl-step1", Progress(rl_step=1), torch.nn.Linear(2, 2), extras={"bad": _Unpicklable()})
    with pytest.raises(RuntimeError, match="writing a state checkpoint"):
        store.wait()
    assert store.states() == [] and not list((tmp_path / "checkpoints" / "state").glob(".tmp-*"))
    store.wait()  # the error is raised once


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("not picklable")

    def __deepcopy__(self, memo):
        return self


def test_only_the_writing_rank_says_it_resumes(tmp_path, capsys):
    """Data-parallel ranks all open the state; only rank 0 (the one that writes) prints the line."""
    StateStore(tmp_path, CheckpointConfig()).save("rl-step1", Progress(rl_step=1))
    assert StateStore(tmp_path, CheckpointConfig(), writes=False).open("auto").progress.rl_step == 1
    assert "resuming from" not in capsys.readouterr().err
    StateStore(tmp_path, CheckpointConfig()).open("auto")
    assert capsys.readouterr().err.count("resuming from") == 1
