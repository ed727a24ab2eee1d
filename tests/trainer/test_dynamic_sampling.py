"""DAPO's dynamic sampling in the RL stage: groups without reward spread are replaced by fresh
rollouts, for a bounded number of rounds; metrics still see every sampled group."""

from __future__ import annotations

from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.stages import _collect
from agentic_rl.types import Task, Trajectory, TrajectoryGroup


def _fake_collect(reward_stream):
    """collect(n, seed) handing out groups whose rewards come from `reward_stream`, in order."""
    calls = []

    def collect(n: int, seed: int):
        calls.append((n, seed))
        groups = []
        for _ in range(n):
            rewards = next(reward_stream)
            task = Task(f"t{len(groups)}-{seed}", "p")
            groups.append(TrajectoryGroup(task, tuple(Trajectory(task, (), reward=r) for r in rewards)))
        return groups, RolloutStats(1.0, 2 * n, 10 * n)

    return collect, calls


def test_without_dynamic_sampling_every_group_is_kept():
    rl = load_config("recipes/tiny.yaml").rl  # tasks_per_step 2
    collect, calls = _fake_collect(iter([[1, 1], [0, 1]]))
    kept, sampled, stats = _collect(collect, rl, seed=0)
    assert len(kept) == len(sampled) == 2 and len(calls) == 1


def test_dynamic_sampling_refills_until_enough_groups_have_spread():
    rl = load_config("recipes/tiny.yaml", ["rl.dynamic_sampling=true", "rl.max_refill_rounds=3"]).rl
    # round 0: one flat, one with spread -> refill 1: flat -> refill 1: spread -> done (2 kept)
    collect, calls = _fake_collect(iter([[1, 1], [0, 1], [0, 0], [1, 0]]))
    kept, sampled, stats = _collect(collect, rl, seed=0)
    assert [g.rewards for g in kept] == [[0, 1], [1, 0]]
    assert [n for n, _ in calls] == [2, 1, 1] and len({s for _, s in calls}) == 3  # fresh seeds
    assert len(sampled) == 4 and stats.seconds == 3.0 and stats.generated_tokens == 40


def test_dynamic_sampling_gives_up_after_max_rounds():
    rl = load_config("recipes/tiny.yaml", ["rl.dynamic_sampling=true", "rl.max_refill_rounds=1"]).rl
    collect, calls = _fake_collect(iter([[1, 1], [0, 0], [1, 1], [0, 0]]))
    kept, sampled, _ = _collect(collect, rl, seed=0)
    assert kept == [] and len(sampled) == 4 and len(calls) == 2
