"""Partial rollouts: episodes in flight go on across a weight sync (`rl.partial_rollout`).

Each production round (one a step, `trainer/producer.py`) decodes the groups carried from the rounds
before together with the round's fresh tasks, every episode for at most `turns_per_version` turns
under the weights the sampler holds. An episode that has not ended by then is paused: it keeps its
env, its turns (their ids and the logprobs sampled, each turn with the version that sampled it,
`Turn.version`) and the context the engine held, and the next round prefills that context under the
newer weights and decodes on from it. A group leaves the pool, for the round's batch, in the round
its last episode ends; an episode that would be decoded in more than `max_versions` rounds ends as
truncated at the end of its last one (`span_cut`). The round where the run ends takes every
episode to its end. Where an episode stops depends on turn counts only, never on timing.

A rollback (the weights change out of turn) restarts the groups in flight from their tasks: they
go on as fresh groups of the next round, their tokens dropped, so a task still trains once, and
nothing sampled before a rollback trains after it. A state checkpoint keeps the groups in flight
with their episodes but not their envs (`saved`); a resumed run gives each paused episode a new env
by replaying its actions into it (`rollout/loop.py` `replay`), so it goes on as the run never
stopped. A group one of whose envs answers the replay otherwise (an env whose replies depend on more
than the task and the actions) restarts from its task, as after a rollback.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentic_rl.engines.base import Engine
from agentic_rl.envs.base import close_env
from agentic_rl.rollout.loop import (
    EpisodeState,
    RolloutStats,
    Round,
    advance,
    episode_seeds,
    finish,
    replay,
    start_episodes,
)
from agentic_rl.types import Task, TrajectoryGroup

if TYPE_CHECKING:
    from agentic_rl.rollout.backends import Episodes

CONTINUATION_STRIDE = 1_000_033  # an episode's r-th round draws from seed x this + r
PASS_STRIDE = 7_919  # a round's n-th pass (one generator for the batch) is seeded its seed + n x this


@dataclass
class _Group:
    task: Task
    episodes: list[EpisodeState]
    seeds: list[int]  # the episodes' own seeds (rollout.rng: episode), else []


@dataclass
class RoundResult:
    """One round: the groups whose episodes all ended (outcome rewards unset) and what it counted."""

    groups: list[TrajectoryGroup]
    stats: RolloutStats
    carried: int  # groups in flight after it
    continued: int  # episodes it took on from an earlier round
    span_cut: int  # episodes it ended at the most versions one may span


@dataclass(frozen=True)
class SavedPool:
    """What a state checkpoint keeps of the pool: the tasks to restart, and the groups in flight
    with their episodes as they stand, each without its env."""

    pending: tuple[Task, ...] = ()
    groups: tuple[_Group, ...] = ()


@dataclass
class InFlight:
    """The groups not yet over, carried from round to round, and the tasks to restart (`restart`)."""

    turns_per_version: int
    max_versions: int
    groups: list[_Group] = field(default_factory=list)
    pending: list[Task] = field(default_factory=list)  # restarted from their tasks in the next round

    def tasks(self) -> list[Task]:
        """The tasks in flight: what a checkpoint keeps and a rollback restarts."""
        return [*self.pending, *(g.task for g in self.groups)]

    def restart(self, tasks: Sequence[Task]) -> None:
        """The groups in flight start over from `tasks` in the next round (their envs closed)."""
        self.close()
        self.pending = list(tasks)

    def saved(self) -> SavedPool:
        """The pool as a checkpoint keeps it (copies: the pool goes on meanwhile)."""
        return SavedPool(tuple(self.pending), tuple(
            _Group(g.task, [copy.deepcopy(dataclasses.replace(ep, env=None)) for ep in g.episodes], list(g.seeds))
            for g in self.groups))

    def revive(self, saved: SavedPool, make_env: Callable, timeout_s: float = 0.0) -> list[Task]:
        """Put back the pool a checkpoint kept (its episodes are taken over, not copied): each paused
        episode gets a new env by `replay`; a group one of whose envs does not replay starts over
        from its task, after the checkpoint's own pending tasks. Returns every task started over."""
        self.pending = list(saved.pending)
        for g in saved.groups:
            paused = [ep for ep in g.episodes if ep.paused]
            if all(replay(ep, make_env, timeout_s) for ep in paused):
                self.groups.append(g)
            else:
                for ep in paused:
                    close_env(ep.env)
                self.pending.append(g.task)
        return list(self.pending)

    def close(self) -> None:
        for g in self.groups:
            for ep in g.episodes:
                close_env(ep.env)
        self.groups = []

    def round(self, engine: Engine, how: Episodes, tasks: Sequence[Task], group_size: int, seed: int,
              per_episode: bool, final: bool) -> RoundResult:
        """The carried groups, then the restarted and the fresh `tasks`, advanced together under the
        engine's weights, made and decoded as `how` says; `final`: every episode to its end.
        `per_episode`: each episode draws from a generator of its own (rollout.rng: episode), else
        the round's `seed` seeds one. A pass that ends no group is followed by another over the
        paused episodes, under the same weights, until one does (each pass counts towards an
        episode's `max_versions`), so every round has a group to train."""
        t0 = time.perf_counter()
        new = [*self.pending, *tasks]
        seeds = episode_seeds(seed, range(len(new)), group_size) if per_episode else []
        eps = start_episodes(engine, how.make_env, new, group_size)
        fresh = [_Group(t, eps[k * group_size:(k + 1) * group_size], seeds[k * group_size:(k + 1) * group_size])
                 for k, t in enumerate(new)]
        carried, self.pending = self.groups, []
        pool = [*carried, *fresh]
        limit = Round(0 if final else self.turns_per_version, self.max_versions, engine.version)
        live = [ep for g in pool for ep in g.episodes if ep.rounds == 0 or ep.paused]
        continued = sum(ep.rounds > 0 for ep in live)
        generated, env_s = sum(ep.generated for ep in live), sum(ep.env_s for ep in live)
        advanced, passes = list(live), 0  # every episode this round decodes: the first pass takes them all
        while live:  # a pass that ends no group goes on under the same weights: every round ends one
            self._advance(engine, how, pool, live, seed + PASS_STRIDE * passes, per_episode, limit)
            passes += 1
            live = [] if any(not any(ep.paused for ep in g.episodes) for g in pool) else \
                [ep for g in pool for ep in g.episodes if ep.paused]
        self.groups = [g for g in pool if any(ep.paused for ep in g.episodes)]
        done = [TrajectoryGroup(g.task, tuple(finish(ep) for ep in g.episodes))
                for g in pool if not any(ep.paused for ep in g.episodes)]
        stats = RolloutStats(time.perf_counter() - t0, len(advanced), sum(ep.generated for ep in advanced) - generated,
                             sum(ep.env_s for ep in advanced) - env_s)
        return RoundResult(done, stats, len(self.groups), continued, sum(ep.span_cut for ep in advanced))

    @staticmethod
    def _advance(engine: Engine, how: Episodes, pool: list[_Group], live: list[EpisodeState], seed: int,
                 per_episode: bool, limit: Round) -> None:
        """One pass of `advance` over the `live` episodes of `pool`, each with its own seed for the
        pass (`per_episode`), else one generator seeded `seed`."""
        seeds = {id(ep): s for g in pool for ep, s in zip(g.episodes, g.seeds)}
        row_seeds = [_continuation_seed(seeds[id(ep)], ep.rounds) for ep in live] if per_episode else seed
        advance(engine, live, how.params, how.budget, row_seeds, limit)


def _continuation_seed(seed: int, rounds: int) -> int:
    """An episode's generator in its next round: its own seed in its first, then one a round."""
    return seed if not rounds else (seed * CONTINUATION_STRIDE + rounds) % (1 << 63)
