"""The producer with partial rollouts (`rl.partial_rollout`, `rollout/partial.py`) on the tiny
model and the long-tail env (episodes of 1 to 8 scripted turns): every task trains exactly once,
two runs are identical, the load refuses what does not map, and a rollback at every step position
restarts the groups in flight with nothing sampled before it training after it."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from agentic_rl.errors import ConfigError
from agentic_rl.monitor.metrics import MACHINE_PREFIXES
from agentic_rl.rollout.partial import InFlight
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import train
from agentic_rl.trainer.producer import Producer
from tests.rollout.long_tail_env import register
from tests.trainer.test_producer import HANG_S, _within

BASE = ["rl.steps=4", "log.progress=false", "log.tensorboard=false", "eval.baselines=false", "eval.tasks_per_split=1",
        "sft.examples=0", "env.name=long_tail", "rollout.max_turns=8", "rollout.max_new_tokens=6",
        "rollout.max_episode_tokens=48", "rl.tasks.group_size=2", "rl.max_staleness=1",
        "rl.partial_rollout.turns_per_version=1", "rl.partial_rollout.max_versions=3"]


def _run(out, monkeypatch, *overrides) -> tuple[list[dict], list[tuple[int, list]], list[str]]:
    """The run's step rows, the groups each step trained (in order) and every task drawn."""
    register()
    trained, drawn, take = [], [], Producer.take
    sample = InFlight.round

    def taking(self, step):
        produced, waited = take(self, step)
        trained.append((step, produced.kept))
        return produced, waited

    def rounding(self, engine, how, tasks, *args, **kwargs):
        drawn.extend(t.id for t in tasks)
        return sample(self, engine, how, tasks, *args, **kwargs)
    monkeypatch.setattr(Producer, "take", taking)
    monkeypatch.setattr(InFlight, "round", rounding)
    train(load_config("recipes/tiny.yaml", [*BASE, *overrides, f"output_dir={out}"]))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in r.items() if not k.startswith(MACHINE_PREFIXES)} for r in rows]
    return [r for r in rows if r.get("stage") == "rl" and "weight_version" in r], trained, drawn


def test_every_task_trains_exactly_once_and_the_run_reproduces(tmp_path, monkeypatch):
    """One turn a round, episodes up to 3 versions: groups are carried (some step continues an
    episode), each task drawn trains in exactly one step (the last round ends every episode, so
    nothing is left in flight), no token is staler than k + max_versions - 1 = 3 (the run checks
    per token and would raise), and a second run is identical, its trajectories included."""
    rows, trained, drawn = _run(tmp_path / "a", monkeypatch)
    assert sum(r["partial/episodes_continued"] for r in rows) > 0
    assert Counter(g.task.id for _, groups in trained for g in groups) == Counter(drawn)
    assert [s for s, _ in trained] == [1, 2, 3, 4] and max(r["staleness"] for r in rows) <= 3
    again, _, _ = _run(tmp_path / "b", monkeypatch)
    assert rows == again
    assert (tmp_path / "a/trajectories/rl.jsonl").read_bytes() == (tmp_path / "b/trajectories/rl.jsonl").read_bytes()


@pytest.mark.parametrize("overrides, says", [
    (["rl.max_staleness=0"], "rl.max_staleness: 0"),
    (["rl.filters.dynamic_sampling=true"], "dynamic_sampling"),
    (["rollout.workers.count=2"], "in-process"),
    (["rl.partial_rollout.max_versions=1"], "max_versions must be >= 2"),
])
def test_what_does_not_map_is_refused_at_load(overrides, says):
    with pytest.raises(ConfigError, match=says):
        load_config("recipes/tiny.yaml", ["rl.max_staleness=1", "rl.partial_rollout.turns_per_version=1", *overrides])


@pytest.mark.parametrize("at", [2, 3, 4])
def test_a_rollback_restarts_the_groups_in_flight(tmp_path, monkeypatch, at):
    """A rollback after step `at` drops the batches ahead (as without partial rollouts) and restarts
    the groups in flight before the first of them from their tasks: every group trained after the
    rollback was sampled wholly by the restored weights or later (no token of the weights rolled
    back from), every restarted task trains after it, and the run ends within the bound."""
    from agentic_rl.monitor.collapse import CollapseMonitor

    monkeypatch.setattr(CollapseMonitor, "update", lambda self, row: (
        {"event": "collapse_warning", "evidence": {}} if row.step == at else None))
    restarted, floor, restart = [], [], InFlight.restart

    def recording(self, tasks):
        restarted.extend(t.id for t in tasks)
        return restart(self, tasks)
    discard = Producer.discard

    def discarding(self, step):
        floor.append(self.run.engine.version)  # the restored weights' version: the rollback synced them
        return discard(self, step)
    monkeypatch.setattr(InFlight, "restart", recording)
    monkeypatch.setattr(Producer, "discard", discarding)
    rows, trained, _ = _within(HANG_S, lambda: _run(tmp_path, monkeypatch, "rl.collapse.actions=[rollback]"))
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and len(floor) == 1
    after = [g for s, groups in trained if s > at for g in groups]
    assert all(t.version >= floor[0] for g in after for traj in g.trajectories for t in traj.turns)
    assert not Counter(restarted) - Counter(g.task.id for g in after)  # each restarted task trains after


def _resumed_from(a, name: str, out, monkeypatch, *overrides) -> list[tuple[int, list]]:
    """Run `a` as it stood at its state checkpoint `name`, resumed into `out`: the groups each step
    after it trained."""
    import shutil

    shutil.copytree(a, out)
    for later in [s for s in (out / "checkpoints" / "state").glob("*-rl-step*") if s.name > name]:
        shutil.rmtree(later)
    trained, take = [], Producer.take

    def taking(self, step):
        produced, waited = take(self, step)
        trained.append((step, produced.kept))
        return produced, waited
    monkeypatch.setattr(Producer, "take", taking)
    train(load_config("recipes/tiny.yaml", [*BASE, "checkpoint.keep_last=0", *overrides, f"output_dir={out}"]),
          resume=str(out / "checkpoints" / "state" / name))
    monkeypatch.setattr(Producer, "take", take)
    return trained


def _rows(out) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(MACHINE_PREFIXES)} for r in rows if r.get("stage") != "event"]


def test_a_resume_at_every_step_with_groups_in_flight_is_the_run_never_stopped(tmp_path, monkeypatch):
    """A state checkpoint holds the groups in flight with their episodes, not their envs; a run
    resumed from any state with groups in flight rebuilds each paused episode's env by replaying its
    actions (the long-tail env counts its turns, so an env made afresh would end the episode at the
    wrong turn) and is the uninterrupted run: the same rows, trajectories (each turn's version
    included) and weights. Regression: the groups were restarted from their tasks, so the resumed run
    trained other tokens than the uninterrupted one."""
    import torch
    from safetensors.torch import load_file

    a = tmp_path / "a"
    _, trained, _ = _run(a, monkeypatch, "checkpoint.keep_last=0")
    monkeypatch.undo()  # the run's recorders
    states = sorted((a / "checkpoints" / "state").glob("*-rl-step*"))
    held = {s.name: torch.load(s / "extras.pt", weights_only=False)["partial_pool"] for s in states}
    assert not held[states[-1].name].groups  # the last round ended every episode
    names = [n for n in sorted(held) if held[n].groups]
    assert names  # states with groups in flight, some episode of which has already taken a turn
    assert any(ep.turns for n in names for g in held[n].groups for ep in g.episodes if ep.paused)
    for name in names:
        b = tmp_path / f"from-{name}"
        after = _resumed_from(a, name, b, monkeypatch)
        step = int(name.rsplit("step", 1)[1])
        assert [(s, [g.task.id for g in gs]) for s, gs in after] == [
            (s, [g.task.id for g in gs]) for s, gs in trained if s > step], name
        assert _rows(b) == _rows(a), name
        assert (b / "trajectories/rl.jsonl").read_bytes() == (a / "trajectories/rl.jsonl").read_bytes(), name
        wa, wb = load_file(a / "checkpoints/rl/model.safetensors"), load_file(b / "checkpoints/rl/model.safetensors")
        assert all(torch.equal(wa[k], wb[k]) for k in wa), name
        events = [json.loads(line) for line in (b / "metrics.jsonl").read_text().splitlines()]
        resumed = [e for e in events if e.get("event") == "partial_rollouts_resumed"]
        assert [(e["groups"], e["restarted"]) for e in resumed] == [(len(held[name].groups), 0)], name


def test_a_group_whose_env_does_not_replay_restarts_from_its_task(tmp_path, monkeypatch):
    """An env whose replies depend on more than its task and the actions (here: a counter of the
    process's resets, as a clock or a service would) cannot be rebuilt: its group starts over from
    its task, the resume says how many did, and each of them trains after it rather than being lost."""
    from tests.rollout import long_tail_env

    a = tmp_path / "a"
    _run(a, monkeypatch, "checkpoint.keep_last=0")
    monkeypatch.undo()
    states = sorted((a / "checkpoints" / "state").glob("*-rl-step*"))
    import torch

    held = {s.name: torch.load(s / "extras.pt", weights_only=False)["partial_pool"] for s in states}
    name = next(n for n in sorted(held) if held[n].groups)
    resets, step = [0], long_tail_env.LongTailEnv.step

    def drifting(self, action):  # the observation carries how many resets the process has made
        result = step(self, action)
        return dataclasses.replace(result, observation=tuple({**m, "content": m["content"] + f" [{resets[0]}]"}
                                                             for m in result.observation))
    reset = long_tail_env.LongTailEnv.reset

    def counting(self, task):
        resets[0] += 1
        return reset(self, task)
    monkeypatch.setattr(long_tail_env.LongTailEnv, "step", drifting)
    monkeypatch.setattr(long_tail_env.LongTailEnv, "reset", counting)
    after = _resumed_from(a, name, tmp_path / "b", monkeypatch)
    events = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e.get("event") == "partial_rollouts_resumed"]
    assert [e["restarted"] for e in resumed] == [len(held[name].groups) + len(held[name].pending)]
    assert not Counter(g.task.id for g in held[name].groups) - Counter(g.task.id for _, gs in after for g in gs)


def test_a_state_that_kept_only_the_tasks_in_flight_restarts_them(tmp_path, monkeypatch):
    """A state checkpoint written before the groups themselves were kept holds only their tasks
    (`partial_in_flight`): a resume from it starts each over, says how many, and trains each."""
    import torch

    a = tmp_path / "a"
    _run(a, monkeypatch, "checkpoint.keep_last=0")
    monkeypatch.undo()
    states = sorted((a / "checkpoints" / "state").glob("*-rl-step*"))
    held = {s.name: torch.load(s / "extras.pt", weights_only=False) for s in states}
    name = next(n for n in sorted(held) if held[n]["partial_pool"].groups)
    extras = held[name]
    tasks = [*extras["partial_pool"].pending, *(g.task for g in extras.pop("partial_pool").groups)]
    torch.save({**extras, "partial_in_flight": tasks}, a / "checkpoints" / "state" / name / "extras.pt")
    after = _resumed_from(a, name, tmp_path / "b", monkeypatch)
    events = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e.get("event") == "partial_rollouts_resumed"]
    assert [(e["groups"], e["restarted"]) for e in resumed] == [(0, len(tasks))]
    assert not Counter(t.id for t in tasks) - Counter(g.task.id for _, gs in after for g in gs)
