"""DAPO's dynamic sampling in the RL step: groups without reward spread are replaced by fresh
rollouts, for a bounded number of rounds; metrics still see every sampled group."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.trainer import producer
from agentic_rl.trainer.config import load_config
from agentic_rl.types import Task, Trajectory, TrajectoryGroup


@pytest.fixture
def fake_rollouts(monkeypatch):
    """`sample_groups(run, n, seed)` handing out groups whose rewards come from a stream, in order;
    returns (the stream setter, the calls made)."""
    calls, stream = [], {}

    def sample_groups(run, n: int, seed: int):
        calls.append((n, seed))
        groups = []
        for _ in range(n):
            rewards = next(stream["rewards"])
            task = Task(f"t{len(groups)}-{seed}", "p")
            groups.append(TrajectoryGroup(task, tuple(Trajectory(task, (), reward=r) for r in rewards)))
        return groups, RolloutStats(1.0, 2 * n, 10 * n)

    monkeypatch.setattr(producer, "sample_groups", sample_groups)
    return lambda rewards: stream.update(rewards=iter(rewards)), calls


def _run(*overrides):
    return SimpleNamespace(cfg=load_config("recipes/tiny.yaml", list(overrides)))  # rl.tasks.per_step 2


def test_without_dynamic_sampling_every_group_is_kept(fake_rollouts):
    rewards, calls = fake_rollouts
    rewards([[1, 1], [0, 1]])
    kept, sampled, stats = producer.collect(_run(), seed=0)
    assert len(kept) == len(sampled) == 2 and len(calls) == 1


def test_dynamic_sampling_refills_until_enough_groups_have_spread(fake_rollouts):
    rewards, calls = fake_rollouts
    # round 0: one flat, one with spread -> refill 1: flat -> refill 1: spread -> done (2 kept)
    rewards([[1, 1], [0, 1], [0, 0], [1, 0]])
    kept, sampled, stats = producer.collect(_run("rl.filters.dynamic_sampling=true",
                                                "rl.filters.max_refill_rounds=3"), seed=0)
    assert [g.rewards for g in kept] == [[0, 1], [1, 0]]
    assert [n for n, _ in calls] == [2, 1, 1] and len({s for _, s in calls}) == 3  # fresh seeds
    assert len(sampled) == 4 and stats.seconds == 3.0 and stats.generated_tokens == 40


def test_dynamic_sampling_gives_up_after_max_rounds(fake_rollouts):
    rewards, calls = fake_rollouts
    rewards([[1, 1], [0, 0], [1, 1], [0, 0]])
    kept, sampled, _ = producer.collect(_run("rl.filters.dynamic_sampling=true", "rl.filters.max_refill_rounds=1"),
                                       seed=0)
    assert kept == [] and len(sampled) == 4 and len(calls) == 2
