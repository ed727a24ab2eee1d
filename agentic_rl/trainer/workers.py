"""Rollout workers on Ray: `rollout.workers: N` runs a step's episodes on N Ray actors.

Each worker is an actor holding an embedded engine (its own copy of the policy), the env factory and
the tokenizer; episodes run there, tools and sandboxes included. A step's tasks are dealt to the
workers (a task's whole group on one worker, which shares its prompt's cache); the groups come back
with their token ids and logprobs, and the trainer scores them. Weights reach the workers at the
version boundary through Ray's object store (one `ray.put` a sync, read by every worker), and every
worker is probed (`engines/probe.py`) like the in-process engine.

A worker that dies mid-step costs its own episodes: they come back as infrastructure failures
(`worker`, trained on by nobody) and the step goes on with the others. Ray restarts the actor; a
worker that does not hold the current version loads it before its next episodes.

Ray connects to the cluster in RAY_ADDRESS, or starts a local one. With `rollout.rng: episode` each
episode draws from its own seeded generator, so in fp32 the workers sample what the in-process engine
would (tested).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import torch

from agentic_rl.engines.base import Sample, SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.failpoints import failpoint
from agentic_rl.models import sharding
from agentic_rl.rollout.loop import RolloutStats, rollout
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.episodes import episodes
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

WORKER_SEED_STRIDE = 7_919  # a worker's batch seed (rollout.rng: batch) is the step's + this x its index


class RolloutWorker:
    """One Ray actor's state: the policy's sampler and the run's envs (built from the config)."""

    def __init__(self, cfg: Config, index: int):
        from agentic_rl.models.loader import load_model

        torch.set_num_threads(max(1, int(cfg.rollout.worker_cpus)))
        self.cfg, self.index = cfg, index
        model, self.tokenizer = load_model(cfg.model.name, seed=cfg.seed, device=cfg.model.device)
        self.engine = HFEngine(model, self.tokenizer, cfg.model.precision)
        self.engine.version = -1  # no weights of the run's yet
        self.episodes = episodes(get_env(cfg.env.name), cfg.env.options, cfg.rollout)

    def load(self, weights: dict[str, torch.Tensor], version: int) -> int:
        if version != self.engine.version:
            self.engine.model.load_state_dict(weights)
            self.engine.sync_weights()
            self.engine.version = version
        return version

    def rollout(self, tasks: Sequence[Task], seed: int, episode_seeds: Sequence[int] | None, weights, version: int):
        """The tasks' groups (unscored), sampled by `version` (loaded first when this worker lacks it)."""
        if weights is not None:
            self.load(weights, version)
        failpoint(f"worker{self.index}.rollout")  # tests kill a worker here, mid-step
        ep = self.episodes
        groups, stats = rollout(self.engine, self.tokenizer, ep.make_env, tasks, self.cfg.rl.tasks.group_size,
                                ep.params, ep.budget, seed=seed, episode_seeds=episode_seeds)
        return groups, stats

    def generate(self, prompt: Sequence[int], params: SamplingParams) -> Sample:
        """One action for `prompt` (the sync probe's greedy continuation)."""
        return self.engine.session(seed=0).generate({0: list(prompt)}, params)[0]

    def pid(self) -> int:
        return os.getpid()


class RolloutWorkers:
    """The pool: deals a step's tasks to the workers, syncs and probes them, survives their deaths."""

    def __init__(self, cfg: Config, version: int = 0, start_timeout_s: float = 600.0):
        import ray

        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                     log_to_driver=False)
        actor = ray.remote(num_cpus=cfg.rollout.worker_cpus, num_gpus=cfg.rollout.worker_gpus, max_restarts=-1,
                           max_task_retries=0)(RolloutWorker)
        self.actors = [actor.remote(cfg, i) for i in range(cfg.rollout.workers)]
        try:
            ray.get([a.pid.remote() for a in self.actors], timeout=start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(f"{len(self.actors)} rollout workers did not start within {start_timeout_s:g}s: the Ray "
                               f"cluster may lack {cfg.rollout.worker_cpus:g} free CPUs for each "
                               "(rollout.worker_cpus); `ray status` shows what it has") from None
        self.group_size = cfg.rl.tasks.group_size
        self.version = version
        self._weights = None
        self._down: set[int] = set()  # workers whose last call died: Ray restarts them

    def _revive(self, timeout_s: float = 300.0) -> None:
        """Wait for the workers Ray is restarting (a call sent while the death is still being noticed
        would fail too)."""
        import ray

        deadline = time.monotonic() + timeout_s
        for i in sorted(self._down):
            while True:
                try:
                    ray.get(self.actors[i].pid.remote(), timeout=60)
                    break
                except _actor_errors():
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        self._down.clear()

    def sync(self, model: torch.nn.Module, version: int) -> None:
        """Every live worker gets `model`'s weights as `version` (a dead one loads them with its next
        episodes)."""
        import ray

        self._weights = ray.put({k: v.detach().to("cpu") for k, v in sharding.full_state_dict(model).items()})
        self.version = version
        self._each([a.load.remote(self._weights, version) for a in self.actors])

    def checked_sync(self, model: torch.nn.Module, version: int, probe) -> float | None:
        """`sync`, then the probe on every worker that answers: the largest gap (a worker that died
        is probed by nobody; it loads the version with its next episodes)."""
        self.sync(model, version)
        if probe is None:
            return None
        gaps = []
        for actor in self.actors:
            try:
                gaps.append(probe.check(WorkerEngine(actor, version), model))
            except _actor_errors():
                continue
        return max(gaps, default=None)

    def rollout(self, tasks: Sequence[Task], seed: int,
                episode_seeds: Sequence[int] | None = None) -> tuple[list[TrajectoryGroup], RolloutStats]:
        """The tasks' groups, in order: worker i rolls out tasks i, i + N, ...; a worker that fails
        returns its groups as the machine's failures."""
        start, n, G = time.perf_counter(), len(self.actors), self.group_size
        self._revive()
        calls = []
        for i, actor in enumerate(self.actors):
            mine = list(range(i, len(tasks), n))
            seeds = [episode_seeds[k * G + j] for k in mine for j in range(G)] if episode_seeds is not None else None
            calls.append((mine, actor.rollout.remote([tasks[k] for k in mine], seed + WORKER_SEED_STRIDE * i, seeds,
                                                     self._weights, self.version)))
        out: list = [None] * len(tasks)
        episodes = generated = 0
        for i, ((mine, _), result) in enumerate(zip(calls, self._each([ref for _, ref in calls], keep_errors=True))):
            if isinstance(result, Exception):
                self._down.add(i)
                for k in mine:
                    out[k] = _failed_group(tasks[k], G, f"rollout worker died: {type(result).__name__}")
                continue
            groups, stats = result
            for k, g in zip(mine, groups):
                out[k] = g
            episodes, generated = episodes + stats.episodes, generated + stats.generated_tokens
        return out, RolloutStats(time.perf_counter() - start, episodes, generated)

    def pids(self) -> list[int]:
        import ray

        return ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)

    @staticmethod
    def _each(refs, keep_errors: bool = False) -> list:
        """Each call's result, or (keep_errors) the error of a worker that died or raised."""
        import ray

        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref))
            except _actor_errors() as e:
                if not keep_errors and not isinstance(e, ray.exceptions.RayActorError):
                    raise
                out.append(e)
        return out


class WorkerEngine:
    """A worker seen as an engine by the sync probe: a greedy decode at a version."""

    def __init__(self, actor, version: int):
        self.actor, self.version = actor, version

    def session(self, seed: int = 0) -> WorkerEngine:
        return self

    def generate(self, prompts, params: SamplingParams) -> dict[int, Sample]:
        import ray

        return {row: ray.get(self.actor.generate.remote(list(ids), params)) for row, ids in prompts.items()}


def _actor_errors() -> tuple[type[Exception], ...]:
    import ray

    return (ray.exceptions.RayActorError, ray.exceptions.RayTaskError)


def _failed_group(task: Task, group_size: int, why: str) -> TrajectoryGroup:
    return TrajectoryGroup(task, tuple(Trajectory(task, (), error=why, infra_failure="worker")
                                       for _ in range(group_size)))
