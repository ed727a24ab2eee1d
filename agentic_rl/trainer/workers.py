"""Rollout workers on Ray: `rollout.workers.count: N` runs a step's episodes on N Ray actors.

The pool is a rollout backend (`rollout/backends.py`). Each worker is an actor holding an embedded
engine (its own copy of the policy), the env factory and the tokenizer; episodes run there, tools
and sandboxes included. A step's tasks are dealt to the
workers (a task's whole group on one worker, which shares its prompt's cache); the groups come back
with their token ids and logprobs, and the trainer scores them. Weights reach the workers at the
version boundary through Ray's object store (one `ray.put` a sync, read by every worker), and every
worker is probed (`engines/probe.py`) like the in-process engine.

With an agent program (`rollout.agent`) each worker runs the agent's episodes of its tasks against a
recording proxy of its own over its engine (`rollout/agents.py`), `rollout.agent.concurrency` at
once on that worker; they come back scored (the agent's reward, else the env's verifier there), with
their ids `w{index}s{seed}-t{i}-g{j}`.

A worker that dies mid-rollout costs its own episodes (its tasks' whole groups): they come back as
infrastructure failures (`worker`, trained on by nobody) and the step goes on with the others. Ray
restarts the actor and the pool waits for it; a worker that does not hold the current version loads
it before its next episodes or probe, so one that dies mid-sync or mid-probe is probed on the weights
it will sample. A worker whose code raises is not dead: the error stops the run with its traceback.

Ray connects to the cluster in RAY_ADDRESS, or starts a local one. With `rollout.rng: episode` each
episode draws from its own seeded generator, so in fp32 the workers sample what the in-process engine
would (tested).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentic_rl.engines.base import Sample, SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import resolve_env
from agentic_rl.failpoints import failpoint
from agentic_rl.models import sharding
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.agents import AgentRollouts, load_agent
from agentic_rl.rollout.backends import Episodes, Progress
from agentic_rl.rollout.loop import RolloutStats, rollout
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.episodes import episodes
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

WORKER_SEED_STRIDE = 7_919  # a worker's batch seed (rollout.rng: batch) is the step's + this x its index


@dataclass(frozen=True)
class Weights:
    """A version of the policy's weights in Ray's object store. Sent as a reference inside this
    record, so a worker fetches the state dict only when it lacks the version."""

    ref: object  # a ray.ObjectRef of the state dict
    version: int


class RolloutWorker:
    """One Ray actor's state: the policy's sampler and the run's envs (built from the config)."""

    def __init__(self, cfg: Config, index: int):
        from agentic_rl.models.loader import load_model

        torch.set_num_threads(max(1, int(cfg.rollout.workers.cpus)))
        self.cfg, self.index = cfg, index
        model, self.tokenizer = load_model(cfg.model.name, seed=cfg.seed, device=cfg.model.device,
                                           rope_scaling=cfg.model.rope_scaling)
        self.engine = HFEngine(model, self.tokenizer, cfg.model.precision)
        self.engine.version = -1  # no weights of the run's yet
        self.episodes = episodes(resolve_env(cfg.env.name, cfg.env.options), cfg.env.options, cfg.rollout,
                                 reward=cfg.reward, policy=cfg.model.name)
        agent = cfg.rollout.agent
        self.agents = AgentRollouts(load_agent(agent.program, agent.pool), self.engine, self.tokenizer, self.episodes,
                                    agent.timeout_s, agent.concurrency, agent.history,
                                    label=f"w{index}s") if agent.program else None

    def load(self, weights: Weights | None) -> int:
        """Hold `weights` (fetched and loaded unless this worker holds their version); its version."""
        if weights is not None and weights.version != self.engine.version:
            import ray

            failpoint(f"worker{self.index}.load")  # tests kill a worker here, mid-sync
            self.engine.model.load_state_dict(ray.get(weights.ref))
            self.engine.sync_weights()
            self.engine.version = weights.version
        return self.engine.version

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, episode_seeds: Sequence[int] | None,
                weights: Weights | None):
        """The tasks' groups (unscored; an agent's scored), sampled by `weights` (loaded first when this
        worker lacks them)."""
        self.load(weights)
        failpoint(f"worker{self.index}.rollout")  # tests kill a worker here, mid-step
        if self.agents is not None:
            return self.agents.rollout(tasks, group_size, seed, episode_seeds)
        ep = self.episodes
        groups, stats = rollout(self.engine, ep.make_env, tasks, group_size, ep.params, ep.budget,
                                seed=seed if episode_seeds is None else episode_seeds)
        return groups, stats

    def generate(self, prompt: Sequence[int], params: SamplingParams, weights: Weights | None) -> Sample:
        """One action for `prompt` by `weights` (the sync probe's greedy continuation): a worker Ray
        restarted since the sync loads them first, so the probe checks the weights it will sample."""
        self.load(weights)
        failpoint(f"worker{self.index}.probe")  # tests kill a worker here, mid-probe
        return self.engine.session(seed=0).generate({0: list(prompt)}, params)[0]

    def pid(self) -> int:
        return os.getpid()


class RolloutWorkers:
    """The pool: deals a step's tasks to the workers, scores their groups by `episodes`' reward (the
    trainer's), syncs and probes the workers, survives their deaths.

    A worker that dies (`RayActorError`) is restarted by Ray and waited for, up to
    `restart_timeout_s` from the first wait; a worker whose code raises (`RayTaskError`: a bug in the env, the reward's
    inputs, the loop) stops the run with the remote traceback, as the same bug does in process."""

    def __init__(self, cfg: Config, episodes: Episodes, start_timeout_s: float = 600.0,
                 restart_timeout_s: float = 300.0):
        import ray

        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                     log_to_driver=False)
        actor = ray.remote(num_cpus=cfg.rollout.workers.cpus, num_gpus=cfg.rollout.workers.gpus, max_restarts=-1,
                           max_task_retries=0)(RolloutWorker)
        self.actors = [actor.remote(cfg, i) for i in range(cfg.rollout.workers.count)]
        try:
            ray.get([a.pid.remote() for a in self.actors], timeout=start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(f"{len(self.actors)} rollout workers did not start within {start_timeout_s:g}s: the Ray "
                               f"cluster may lack {cfg.rollout.workers.cpus:g} free CPUs for each "
                               "(rollout.workers.cpus); `ray status` shows what it has") from None
        self.episodes = episodes
        self.scored = bool(cfg.rollout.agent.program)  # an agent's episodes come back scored by their worker
        self.restart_timeout_s = restart_timeout_s
        self.weights: Weights | None = None  # the last sync's (None: the workers' own start)
        self._down: set[int] = set()  # workers whose last call died: Ray restarts them

    def send(self, model: torch.nn.Module, version: int) -> None:
        """Every live worker gets `model`'s weights as `version` (a dead one loads them with its next
        call)."""
        import ray

        self.weights = Weights(ray.put({k: v.detach().to("cpu") for k, v in sharding.full_state_dict(model).items()}),
                               version)
        for i, result in enumerate(_each([a.load.remote(self.weights) for a in self.actors])):
            if isinstance(result, Exception):
                self._down.add(i)

    def sync(self, model: torch.nn.Module, version: int, probe) -> float | None:
        """`send`, then the probe on every worker: the largest gap. A worker that dies meanwhile is
        waited for and probed once it is back, on the weights it loads first: every worker is probed,
        so every data-parallel rank runs as many trainer forwards (under FSDP each is a collective)."""
        self.send(model, version)
        if probe is None:
            return None
        return max(self._probed(i, model, probe) for i in range(len(self.actors)))

    def _probed(self, i: int, model: torch.nn.Module, probe) -> float:
        import ray

        deadline = time.monotonic() + self.restart_timeout_s
        while True:
            try:
                return probe.check(WorkerEngine(self.actors[i], self.weights), model)
            except ray.exceptions.RayActorError:  # before the trainer's forward: the sample never came
                self._wait_for(i, deadline)

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, episode_seeds: Sequence[int] | None = None,
                progress: Progress | None = None) -> tuple[list[TrajectoryGroup], RolloutStats]:
        """The tasks' groups, in order, scored: worker i rolls out tasks i, i + N, ... (a worker with
        none is not called); a worker that dies returns its groups as the machine's failures.
        `progress` hears of the episodes once the groups are back."""
        start, n, G = time.perf_counter(), len(self.actors), group_size
        self._revive()
        calls = []
        for i, actor in enumerate(self.actors):
            mine = list(range(i, len(tasks), n))
            if not mine:
                continue
            seeds = [episode_seeds[k * G + j] for k in mine for j in range(G)] if episode_seeds is not None else None
            calls.append((i, mine, actor.rollout.remote([tasks[k] for k in mine], G, seed + WORKER_SEED_STRIDE * i,
                                                        seeds, self.weights)))
        out: list = [None] * len(tasks)
        parts = []
        for (i, mine, _), result in zip(calls, _each([ref for *_, ref in calls])):
            if progress is not None:
                progress(len(mine) * G)
            if isinstance(result, Exception):
                self._down.add(i)
                for k in mine:
                    out[k] = _failed_group(tasks[k], G, f"rollout worker died: {type(result).__name__}")
                continue
            groups, stats = result
            for k, g in zip(mine, groups):
                out[k] = g
            parts.append(stats)
        stats = RolloutStats.total(parts, time.perf_counter() - start)
        if self.scored:
            return out, stats
        return score_groups(self.episodes.reward, out, self.episodes.budget.step_timeout_s), stats

    def _revive(self) -> None:
        """Wait for the workers Ray is restarting."""
        deadline = time.monotonic() + self.restart_timeout_s
        for i in sorted(self._down):
            self._wait_for(i, deadline)

    def _wait_for(self, i: int, deadline: float) -> None:
        """Until worker i answers (Ray restarts it); a call sent while its death is still being
        noticed fails too, and is sent again. Raises past `deadline`."""
        import ray

        while True:
            try:
                ray.get(self.actors[i].pid.remote(), timeout=max(deadline - time.monotonic(), 0.0))
                self._down.discard(i)
                return
            except ray.exceptions.GetTimeoutError:
                break
            except ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        raise RuntimeError(f"rollout worker {i} died and did not come back within {self.restart_timeout_s:g}s "
                           "(RolloutWorkers restart_timeout_s): Ray may lack the resources to restart it; "
                           "`ray status` shows what the cluster has")

    def pids(self) -> list[int]:
        import ray

        return ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


class WorkerEngine:
    """A worker seen as an engine by the sync probe: a greedy decode by `weights`."""

    def __init__(self, actor, weights: Weights | None):
        self.actor, self.weights = actor, weights
        self.version = weights.version if weights is not None else -1

    def session(self, seed: int = 0) -> WorkerEngine:
        return self

    def generate(self, prompts, params: SamplingParams) -> dict[int, Sample]:
        import ray

        return {row: ray.get(self.actor.generate.remote(list(ids), params, self.weights)) for row, ids in prompts.items()}


def _each(refs) -> list:
    """Each call's result, or the `RayActorError` of a worker that died with it. An error the
    worker's code raised (`RayTaskError`, with its traceback) is raised here."""
    import ray

    out = []
    for ref in refs:
        try:
            out.append(ray.get(ref))
        except ray.exceptions.RayActorError as e:
            out.append(e)
    return out


def _failed_group(task: Task, group_size: int, why: str) -> TrajectoryGroup:
    return TrajectoryGroup(task, tuple(Trajectory(task, (), error=why, infra_failure="worker")
                                       for _ in range(group_size)))
