"""Task samplers: the uniform one keeps the pool's order; the pass-rate curriculum draws the kinds
with the most reward variance more often, never drops a kind, and round-trips its state."""

from __future__ import annotations

import collections

import pytest

from agentic_rl.data.calculator import make_tasks
from agentic_rl.data.curriculum import (
    FailureRateCurriculum,
    PassRateCurriculum,
    make_sampler,
    mixed_pool,
    mixed_tasks,
)
from agentic_rl.types import Task, Trajectory, TrajectoryGroup


def _pool(n_per_kind: int = 200) -> list[Task]:
    return [Task(f"{k}-{i}", "p", meta={"template": k}) for i in range(n_per_kind) for k in ("easy", "mid", "hard")]


def _groups(kind_rates: dict[str, float], G: int = 10) -> list[TrajectoryGroup]:
    out = []
    for kind, rate in kind_rates.items():
        task = Task(f"{kind}-x", "p", meta={"template": kind})
        wins = round(rate * G)
        out.append(TrajectoryGroup(task, tuple(Trajectory(task, (), reward=1.0 if g < wins else 0.1) for g in range(G))))
    return out


def test_uniform_keeps_the_pool_order_and_never_repeats_before_the_pool_is_used():
    pool = _pool(2)
    s = make_sampler("uniform", pool, seed=0)
    assert s.sample(4) + s.sample(2) == pool
    assert s.sample(1) == pool[:1]  # a new pass over the pool


def test_pass_rate_prefers_the_kind_with_the_most_reward_variance():
    s = PassRateCurriculum(_pool(), seed=0)
    for _ in range(5):
        s.update(_groups({"easy": 1.0, "mid": 0.5, "hard": 0.0}))
    # p = (s+1)/(n+2) with decayed counts: easy ~0.98, mid 0.5, hard ~0.02 -> weights ~0.04, 0.27, 0.04
    assert s.weight("mid") > 5 * s.weight("easy") and s.weight("mid") > 5 * s.weight("hard")
    drawn = collections.Counter(s.kind(t) for t in s.sample(300))
    assert drawn["mid"] > 3 * drawn["easy"] and drawn["mid"] > 3 * drawn["hard"]
    assert drawn["easy"] > 0 and drawn["hard"] > 0  # the floor keeps every kind in play
    assert len({t.id for t in s.pool if s.pool.index(t) in s.used}) == 300  # no task drawn twice


def test_pass_rate_state_round_trips():
    a = PassRateCurriculum(_pool(), seed=3)
    a.update(_groups({"easy": 0.9, "mid": 0.4}))
    a.sample(7)
    b = PassRateCurriculum(_pool(), seed=99)
    b.load_state_dict(a.state_dict())
    assert [t.id for t in a.sample(20)] == [t.id for t in b.sample(20)]


def test_unknown_sampler_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: failure_rate, pass_rate, uniform"):
        make_sampler("hardest_first", _pool(1), seed=0)


def test_pass_rate_metrics_name_each_kind_seen():
    s = PassRateCurriculum(_pool(), seed=0)
    assert s.metrics() == {}
    s.update(_groups({"easy": 1.0, "hard": 0.0}))  # 10/10 and 0/10: (10+1)/12 and 1/12
    assert s.metrics() == {"pass_rate/easy": round(11 / 12, 4), "pass_rate/hard": round(1 / 12, 4)}


def test_failure_rate_keeps_the_pool_shares_until_it_has_seen_a_kind():
    # Invariant: unseen kinds all have p = 1/2, so the draw follows the pool's own mix (rl.tasks.mix).
    pool = [Task(f"{k}-{i}", "p", meta={"template": k}) for i in range(300) for k in ("a", "a", "b")]
    drawn = collections.Counter(t.meta["template"] for t in FailureRateCurriculum(pool, seed=1).sample(300))
    assert 170 < drawn["a"] < 230  # 2/3 of 300 = 200; binomial sd ~8


def test_failure_rate_draws_unsolved_kinds_most_and_solved_ones_at_the_floor():
    s = make_sampler("failure_rate", _pool(), seed=0)
    for _ in range(5):
        s.update(_groups({"easy": 1.0, "mid": 0.5, "hard": 0.0}))
    # 5 decayed updates of 10 samples: n = 10 (1 + .9 + .81 + .729 + .6561) = 40.951 for every kind;
    # p = (s+1)/(n+2): easy 41.951/42.951 = .9767, mid .5, hard 1/42.951 = .0233.
    # w = 200 (1 - p + .1): easy 24.66, mid 120, hard 215.3 -> hard:mid:easy = 8.73 : 4.87 : 1
    assert s.weight("hard") / s.weight("easy") == pytest.approx(215.34 / 24.66, rel=1e-3)
    assert s.weight("mid") / s.weight("easy") == pytest.approx(120 / 24.66, rel=1e-3)
    drawn = collections.Counter(s.kind(t) for t in s.sample(360))  # expected 215 / 120 / 25
    assert drawn["hard"] > 1.4 * drawn["mid"] > 2 * drawn["easy"] > 0


def _split_tasks(split: str, n: int, seed: int) -> list[Task]:
    return [Task(f"{split}-{seed}-{i}", "p") for i in range(n)]


def test_mixed_pool_interleaves_equal_shares_and_one_split_is_that_split():
    # Invariant: every prefix of the pool holds the splits in equal shares (within one task), so a
    # short run samples all of them; each split contributes its own stream's first tasks, in order.
    pool = mixed_pool(_split_tasks, ["a", "b", "c"], 10, seed=4)
    assert [t.id for t in pool[:6]] == ["a-4-0", "b-4-0", "c-4-0", "a-4-1", "b-4-1", "c-4-1"]
    assert collections.Counter(t.id[0] for t in pool) == {"a": 4, "b": 3, "c": 3}
    assert mixed_pool(_split_tasks, ["a"], 5, seed=1) == _split_tasks("a", 5, 1)


def test_a_mix_takes_its_shares_in_stream_order_and_every_prefix_keeps_them():
    """Invariant: the counts are n x share rounded to add up to n (here 1:1:3 of 48 is 9.6 / 9.6 /
    28.8 -> 10 / 9 / 29), a value's tasks come in the pool's order, and no prefix strays more than
    one task from its share."""
    pool = make_tasks(48 * 40, seed=1)
    weights = {"bare": 1, "one_step": 1, "two_step": 3}
    picked = mixed_tasks(pool, "family", weights, 48)
    families = [t.meta["family"] for t in picked]
    assert {f: families.count(f) for f in weights} == {"bare": 10, "one_step": 9, "two_step": 29}
    for f in weights:
        assert [t.id for t in picked if t.meta["family"] == f] == [t.id for t in pool if t.meta["family"] == f][
            : families.count(f)]
    for k in range(1, 49):
        for f, w in weights.items():
            assert abs(families[:k].count(f) - k * w / 5) <= 1
    assert mixed_tasks(pool, "family", {"two_step": 1}, 5) == [t for t in pool if t.meta["family"] == "two_step"][:5]
    with pytest.raises(ValueError, match="only 3 of 4 tasks with family = 'bare'"):
        mixed_tasks([t for t in pool if t.meta["family"] == "bare"][:3], "family", {"bare": 1}, 4)
