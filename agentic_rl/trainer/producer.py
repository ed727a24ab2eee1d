"""The steps' rollouts, produced ahead of the update by at most `rl.max_staleness` (k) versions.

A producer thread makes each step's batch in order — sample the tasks, roll them out and score them
through the run's rollout backend (`collect`, `rollout/backends.py`) — and the trainer takes them in
order (`take`). At k = 0 there is no thread: the trainer produces each batch when it asks for it, on
its own thread (env and reward deadlines are SIGALRM timers, armed on the main thread; elsewhere `faults.deadline` interrupts by an
asynchronous exception, which cannot break a blocking system call). Batch s may start once the
sampler holds the weights of step s - 1 - k: at k = 0 that is after step s - 1's sync, so the
producer and the trainer strictly alternate and the run is the synchronous one; at k = 1 batch s is
sampled while step s - 1 updates, and trains one version stale. The staleness is corrected by the
rollout correction (the sampler's logprobs are the behaviour policy, the trainer's recompute the
proximal one, `algorithms/correction.py`): nothing new.

Versions never mix within a batch: the producer holds the engine's lock for a whole batch, and the
trainer takes it for a sync (and for hindsight corrections), so no episode is sampled by two
versions. Which version samples which batch never depends on timing: step s's sync first waits
for every batch up to s + k (`before_sync`), so batch s is always sampled by step s - 1 - k's
weights and a run at k = 1 is as reproducible as a synchronous one. Without partial rollouts an
episode finishes under the weights it started with.

With partial rollouts (`rl.partial_rollout`, `rollout/partial.py`) a batch is one production round:
the groups carried from the rounds before and `rl.tasks.per_step` fresh tasks, each episode taken
at most `turns_per_version` turns (the last step's round: to its end), the groups it ended making
the batch. An episode carried on is sampled by the next round's weights, so one episode spans
versions, never one round: the lock and `before_sync` are as above, and where an episode pauses
depends on turn counts only, so the run stays reproducible. Each turn records its version and a
batch's staleness is counted per token, bounded by k + max_versions - 1. A rollback restarts the
groups in flight before the first dropped batch from their tasks (`partial_before`: their tokens
were partly sampled by the weights rolled back from); a state checkpoint keeps the groups in flight
without their envs (`saved_pool`), and a resume rebuilds each env by replaying its episode's
actions (`rollout/partial.py`), so the resumed run is the uninterrupted one.

A rollback after step r (`discard(r)`) changes the weights out of turn: the batches produced for
the steps after r were sampled by the weights rolled back from, so they are dropped and produced
again from the same tasks (each batch carries the task sampler's state before it). The schedule
then restarts from r: batch s > r is sampled by the weights of step max(s - 1 - k, r), so nothing
starts before step r is over, and the producer is idle through its evaluation and checkpoint as
after any sync. The producer thread lives until `close()`, so a rollback in the last k steps, when
every batch has been produced, still has a thread to produce them again.

A state checkpoint after step s holds the batches already produced for the steps after it (every
one that started before step s's sync, so ended: the sync waited for it), each with the task
sampler's state before it, and the task sampler as it was after the last of them; a resumed run puts
them back and produces the rest from there, with the checkpoint's weights — those the producer would
have used — so it equals the run never stopped, a rollback after the resume included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from agentic_rl.algorithms.dapo import dynamic_sampling_keep
from agentic_rl.rewards.base import new_step, step_metrics
from agentic_rl.rewards.process import apply_process_rewards, process_reward
from agentic_rl.rollout.loop import RolloutStats, episode_seeds
from agentic_rl.rollout.partial import InFlight, SavedPool
from agentic_rl.trainer.distributed import gather_rollouts, world
from agentic_rl.types import Task, TrajectoryGroup

if TYPE_CHECKING:
    from agentic_rl.trainer.config import PartialRolloutConfig
    from agentic_rl.trainer.rl_step import RLRun

BATCH_SEED_STRIDE = 1_000_003  # step s's batch is seeded rl.seed x this + s


@dataclass
class Produced:
    """One step's rollouts, as the trainer takes them."""

    step: int
    kept: list[TrajectoryGroup]  # the groups to train on
    sampled: list[TrajectoryGroup]  # every group sampled (dynamic sampling may have refilled)
    stats: RolloutStats
    version: int  # the sampler's weight version: every token of the batch
    sampler_metrics: dict[str, float]  # the task sampler's figures after this batch
    sampler_before: dict  # the task sampler's state before this batch: a rollback draws the same tasks again
    waited_s: float = 0.0  # how long the producer waited for the weights it needed
    reward_metrics: dict[str, float] | None = None  # what the reward spent on this batch (the ladder's `ladder/...`)
    partial_before: list[Task] | None = None  # partial rollouts: the tasks in flight before this batch's round
    partial_metrics: dict[str, float] | None = None  # partial rollouts: what the round carried, continued, cut


class Producer:
    """Start it with the run; each step `take(step)` its batch, `before_sync(step)` before the
    sync, `synced(step)` once the step is over (its sync, evaluation, checkpoint); `close()` at the end."""

    def __init__(self, run: RLRun, first: int, last: int, max_staleness: int,
                 restored: dict[int, Produced] | None = None, pool: SavedPool | None = None):
        """`restored`: the batches a state checkpoint held; `pool`: the groups it had in flight
        (partial rollouts), put back (`restarted`: the tasks that start over, those whose envs did not
        replay among them)."""
        self.run, self.last, self.k = run, last, max_staleness
        self.partial = in_flight_pool(run.cfg.rl.partial_rollout)
        self.restarted: list[Task] = []
        if self.partial is not None and pool is not None:
            self.restarted = self.partial.revive(pool, run.episodes.make_env, run.episodes.budget.step_timeout_s)
        self.engine_lock = threading.RLock()  # held for a batch, a sync, a hindsight correction
        self._cond = threading.Condition()
        self._synced = first - 1  # the last step over: the sampler holds its weights
        self._ready: dict[int, Produced] = dict(restored or {})
        self._next = max([first - 1, *self._ready]) + 1  # the next step to produce
        self._done = self._next - 1  # the last step produced
        self._floor = 0  # the last step whose weights changed out of turn: no batch is sampled by older ones
        self._busy = False
        self._error: BaseException | None = None
        self._stop = False
        self._thread = None
        if self.k > 0:  # at k = 0 the trainer produces each batch itself, on its own thread, when it asks
            self._thread = threading.Thread(target=self._produce, name="agentic-rl-producer", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ trainer side
    def take(self, step: int) -> tuple[Produced, float]:
        """Step `step`'s batch, and how long the trainer waited for it."""
        t0 = time.perf_counter()
        if self._thread is None and step not in self._ready:
            self._next_batch()
        with self._cond:
            self._cond.wait_for(lambda: step in self._ready or self._error is not None)
            if step not in self._ready:
                raise self._error
            return self._ready.pop(step), time.perf_counter() - t0

    def before_sync(self, step: int) -> None:
        """Wait until every batch the weights before step `step`'s sync may sample is produced (the
        steps up to step + k): so which weights sample which batch never depends on timing."""
        with self._cond:
            self._cond.wait_for(lambda: self._done >= min(step + self.k, self.last) or self._error is not None)
            if self._error is not None:
                raise self._error

    def synced(self, step: int) -> None:
        """Step `step` is over and the sampler holds its weights: the batches they may sample can start."""
        with self._cond:
            self._synced = step
            self._cond.notify_all()

    def in_flight(self) -> dict[int, Produced]:
        """The batches produced and not yet taken. Between a step's sync and `synced` the producer is
        idle (what it started before the sync has ended; what comes next waits for `synced`), so
        these and the task sampler's state are the whole of what it holds."""
        with self._cond:
            assert not self._busy, "the producer is mid-batch: call between a sync and synced()"
            return dict(self._ready)

    def saved_pool(self) -> SavedPool | None:
        """Partial rollouts: the groups in flight after the last batch produced, without their envs
        (a resume rebuilds them); None without partial rollouts."""
        with self._cond:
            assert not self._busy, "the producer is mid-batch: call between a sync and synced()"
            return self.partial.saved() if self.partial is not None else None

    def discard(self, step: int) -> None:
        """Step `step` changed the weights out of turn (a rollback): drop the batches not yet taken
        (sampled by the weights rolled back from, they would train staler than the bound allows) and
        produce them again from the same tasks, by the weights of step `step` on: none starts before
        `synced(step)`."""
        with self._cond:
            assert not self._busy, "the producer is mid-batch: call between a sync and synced()"
            self._floor = step
            restart = self.partial.tasks() if self.partial is not None else []
            if self._ready:
                first = min(self._ready)
                self.run.sampler.load_state_dict(self._ready[first].sampler_before)
                restart = self._ready[first].partial_before or []
                self._next, self._done = first, first - 1
                self._ready.clear()
            if self.partial is not None:  # episodes partly sampled by the weights rolled back from start over
                self.partial.restart(restart)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self.partial is not None:
            self.partial.close()

    # ------------------------------------------------------------------ producer side
    def _produce(self) -> None:
        try:
            while self._next_batch():
                pass
        except BaseException as e:  # noqa: BLE001 - the trainer raises it when it asks for the batch
            with self._cond:
                self._error, self._busy = e, False
                self._cond.notify_all()

    def _next_batch(self) -> bool:
        """Wait until the next batch may start, produce it; False once `close()` is called. With
        every batch produced the thread waits on: a rollback may ask for the last ones again."""
        t0 = time.perf_counter()
        with self._cond:
            self._cond.wait_for(lambda: self._stop or (self._next <= self.last and self._may_start(self._next)))
            if self._stop:
                return False
            step, self._busy = self._next, True
            self._next += 1
            before = self.run.sampler.state_dict()
        waited = time.perf_counter() - t0
        with self.engine_lock:
            version, reward = self.run.engine.version, self.run.episodes.reward
            new_step(reward)  # a per-step budget (the verifier ladder's) starts again
            seed = self.run.cfg.rl.seed * BATCH_SEED_STRIDE + step
            partial_before, partial_metrics = None, None
            if self.partial is None:
                kept, sampled, stats = collect(self.run, seed=seed)
            else:
                partial_before = self.partial.tasks()
                kept, stats, partial_metrics = collect_partial(self.run, seed, self.partial, final=step == self.last)
                sampled = kept
            batch = Produced(step, kept, sampled, stats, version, self.run.sampler.metrics(), before, waited,
                             step_metrics(reward), partial_before, partial_metrics)
        with self._cond:
            self._ready[step], self._done, self._busy = batch, step, False
            self._cond.notify_all()
        return True

    def _may_start(self, step: int) -> bool:
        """The sampler holds the weights batch `step` is sampled by: step max(step - 1 - k, floor)'s."""
        return self._synced >= max(step - 1 - self.k, self._floor)


def collect(run: RLRun, seed: int) -> tuple[list[TrajectoryGroup], list[TrajectoryGroup], RolloutStats]:
    """(groups to train on, every group sampled, rollout stats) for one step.

    With `rl.filters.dynamic_sampling` (DAPO), groups whose rewards are all equal are dropped and
    fresh tasks are rolled out in their place, up to `max_refill_rounds` extra rounds; the step then
    trains on the groups with signal it has (at most tasks.per_step). Without it, every group is kept.
    """
    per_step, filters = run.cfg.rl.tasks.per_step, run.cfg.rl.filters
    groups, stats = sample_groups(run, per_step, seed)
    if not filters.dynamic_sampling:
        return groups, groups, stats
    sampled, rounds = list(groups), [stats]
    kept = _with_spread(groups)
    for r in range(1, filters.max_refill_rounds + 1):
        if len(kept) >= per_step:
            break
        more, st = sample_groups(run, per_step - len(kept), seed + 7919 * r)
        sampled += more
        rounds.append(st)
        kept += _with_spread(more)
    return kept[:per_step], sampled, RolloutStats.total(rounds, sum(st.seconds for st in rounds))


def in_flight_pool(options: PartialRolloutConfig) -> InFlight | None:
    """The pool of groups carried from round to round (`rollout/partial.py`); None when off."""
    if not options.turns_per_version:
        return None
    if world().size > 1:
        raise RuntimeError("rl.partial_rollout runs on one process: data-parallel ranks would each carry "
                           "episodes of their own")
    return InFlight(options.turns_per_version, options.max_versions)


def collect_partial(run: RLRun, seed: int, pool: InFlight, final: bool
                    ) -> tuple[list[TrajectoryGroup], RolloutStats, dict[str, float]]:
    """One round of partial rollouts (`rollout/partial.py`): `rl.tasks.per_step` fresh tasks join
    the groups in flight; the groups it ended (scored, with their process rewards), its stats and
    `partial/...` counts. `final` (the run's last step) takes every episode to its end."""
    rl = run.cfg.rl
    tasks = run.sampler.sample(rl.tasks.per_step)
    out = run.rollouts.advance(pool, tasks, rl.tasks.group_size, seed, run.cfg.rollout.rng == "episode", final)
    groups = with_process_rewards(run, out.groups)
    run.sampler.update(scored(groups))
    return groups, out.stats, {"partial/groups_carried": float(out.carried),
                               "partial/episodes_continued": float(out.continued),
                               "partial/episodes_span_cut": float(out.span_cut)}


def sample_groups(run: RLRun, n: int, seed: int) -> tuple[list[TrajectoryGroup], RolloutStats]:
    """`n` tasks from the sampler, `group_size` episodes each, rolled out and scored by the run's
    backend (`run.rollouts`), then given per-turn process rewards when the recipe names them; the
    sampler learns their pass rates. Data-parallel ranks roll out their shares of the tasks, and
    every rank gets every group."""
    rl, w = run.cfg.rl, world()
    tasks = run.sampler.sample(n)
    positions = w.share(range(len(tasks)))  # data-parallel ranks each roll out their share
    tasks = [tasks[p] for p in positions]
    seeds = episode_seeds(seed, positions, rl.tasks.group_size) if run.cfg.rollout.rng == "episode" else None
    groups, stats = run.rollouts.rollout(tasks, rl.tasks.group_size, seed + 7_919_777 * w.rank, seeds)
    groups, stats = gather_rollouts(with_process_rewards(run, groups), stats)
    run.sampler.update(scored(groups))  # pass rates of what the policy did
    return groups, stats


def with_process_rewards(run: RLRun, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """The groups with the recipe's per-turn process rewards on top of the outcome (credited turn by
    turn), or as they are when it names none."""
    name = run.cfg.rl.algorithm.process_reward
    if not name:
        return groups
    return apply_process_rewards(process_reward(name, run.episodes.judge, run.cfg.reward.judge.turn_weight), groups)


def _with_spread(groups: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    keep = dynamic_sampling_keep(torch.tensor([g.rewards for g in groups], dtype=torch.float32)) if groups else []
    return [g for g, k in zip(groups, keep) if k]


def scored(groups: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """The groups without the episodes the infrastructure failed (`faults.py`): what the policy did."""
    return [TrajectoryGroup(g.task, tuple(t for t in g.trajectories if t.infra_failure is None)) for g in groups]
