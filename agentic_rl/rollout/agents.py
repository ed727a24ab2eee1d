"""`rollout.agent`: a step's episodes run by an agent program of the user's own, through the
recording proxy.

The agent is a Python callable, `"module:function"` or `"path/to/file.py:function"`, called once per
episode as `function(task, base_url)`: `task` is a dict (`id`, `prompt`, `answer`, `meta`) and
`base_url` the proxy's OpenAI base URL for that episode (`http://127.0.0.1:PORT/episodes/ID/v1`:
the episode id travels in the path, so a plain `openai.OpenAI(base_url=base_url)` client records
under it). It returns the episode's reward (a number), or posts it to `/episodes/ID/reward`, or
returns None to have the env's verifier score the episode's last reply.

The proxy (`engines/server.py` in recording mode) serves the policy's engine with the recipe's
sampling parameters, whatever the agent asks, so the recorded logprobs are the ones the loss needs:
this process's embedded engine, a served one (`rollout.engine.name`: our server or vLLM, which
return the ids they sampled and their logprobs), or a Ray worker's own copy (`trainer/workers.py`).

Episodes run `concurrency` at once (`rollout.agent.concurrency`), so the engine batches their calls.
An `async def` agent runs as a task on one event loop of this backend's; a plain function on a
thread of a reused pool, or (`rollout.agent.pool: process`) in a worker process of a reused pool
that the thread waits on (`agent_process.py`: a hung worker is killed at the episode's deadline, a
dead one costs its episode). The calls of a step's episodes all reach the engine at the policy version
the step samples with: the trainer syncs the weights only between steps (`trainer/producer.py`).

Limits: the proxy holds each episode to the recipe's budget (`rollout.max_turns` calls,
`rollout.max_episode_tokens` generated tokens; `engines/recorder.Limits`): a call past it is
refused and the episode is a truncation, trained as the rollout loop trains one, whether the agent
then returns a reward or raises on the refusal (the env's verifier then scores its last reply). An
episode still running `rollout.agent.timeout_s` after it started is given up: the step goes on
without it and its calls are refused from then on. An async agent's task is cancelled; a thread
is left to end (a timer raises in it where it runs Python code) and the pool starts another in its
place. That, an agent that raises (before any budget refused it), and one that ends without
calling the model are the infrastructure's failure (`faults.py`, kind `agent`): the episode trains
nothing. An async agent must not block its loop (a `time.sleep`, a long computation): every episode
on the loop waits with it, and each is given up at its deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.managed import free_port
from agentic_rl.engines.recorder import Limits, Recorder, trajectory
from agentic_rl.faults import deadline
from agentic_rl.registry import load_callable
from agentic_rl.rewards.scoring import score_trajectory
from agentic_rl.rollout.agent_process import ProcessAgent
from agentic_rl.rollout.backends import Episodes, Progress
from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

Agent = Callable[[dict, str], "float | None"]  # or an `async def` of the same signature
_GRACE_S = 1.0  # an episode's own timer fires this long after it is given up: its late calls meet a closed episode


class Proxy:
    """The recording server over `engine`, on a free local port, on a thread of its own."""

    def __init__(self, engine, tokenizer, sampling: SamplingParams | None, history: str, limits: Limits):
        import uvicorn

        from agentic_rl.engines.server import create_app
        from agentic_rl.envs.formats import format_of_template

        fmt = format_of_template(tokenizer.chat_template)  # the run's format: its template is the tokenizer's
        self.recorder = Recorder(tokenizer, engine.eos_ids, history, limits, end_of_turn=fmt.end_of_turn)
        self.port = free_port()
        app = create_app(engine, tokenizer, recorder=self.recorder, sampling=sampling, fmt=fmt)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, name="agentic-rl-proxy", daemon=True)
        self.thread.start()
        until = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > until or not self.thread.is_alive():
                raise RuntimeError(f"the recording proxy did not start on port {self.port}")
            time.sleep(0.05)

    def base_url(self, episode: str) -> str:
        return f"http://127.0.0.1:{self.port}/episodes/{episode}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class AgentRollouts:
    """The rollout backend (`rollout/backends.py`) of an agent program: a call's groups from the
    agent's episodes."""

    def __init__(self, agent: Agent, engine, tokenizer, episodes: Episodes, deadline_s: float = 0.0,
                 concurrency: int = 0, history: str = "keep", label: str = "s"):
        """`engine`: the policy's sampler (embedded or served); `episodes`: the recipe's sampling, reward
        and budget; `deadline_s`: an episode's time from its start (0: none); `concurrency`: episodes
        run at once (0: all of a call's); `history`: `Recorder`'s; `label`: the episode ids' prefix."""
        self.agent, self.reward_fn, self.deadline_s, self.concurrency = agent, episodes.reward, deadline_s, concurrency
        self.label = label
        self.timeout_s = episodes.budget.step_timeout_s  # the verifier's
        limits = Limits(episodes.budget.max_turns, episodes.budget.max_episode_tokens)
        self.proxy = Proxy(engine, tokenizer, episodes.params, history, limits)
        self.runner = _Loop() if inspect.iscoroutinefunction(agent) else _Threads("agentic-rl-agent")
        if isinstance(agent, ProcessAgent) and concurrency:
            agent.start(concurrency)  # their interpreters load the program while the proxy waits

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, episode_seeds: Sequence[int] | None = None,
                progress: Progress | None = None) -> tuple[list[TrajectoryGroup], RolloutStats]:
        """`group_size` episodes of each task (ids `{label}{seed}-t{i}-g{j}`), scored. The proxy
        samples each call as its requests arrive, so `episode_seeds` seed nothing here."""
        start, G = time.perf_counter(), group_size
        ids = [[f"{self.label}{seed}-t{i}-g{j}" for j in range(G)] for i in range(len(tasks))]
        done = self._run([(t, eid) for t, row in zip(tasks, ids) for eid in row], progress)
        groups = [TrajectoryGroup(t, tuple(done[i * G:(i + 1) * G])) for i, t in enumerate(tasks)]
        generated = sum(t.num_generated for g in groups for t in g.trajectories)
        return groups, RolloutStats(time.perf_counter() - start, len(done), generated)

    def _run(self, jobs: Sequence[tuple[Task, str]], progress: Progress | None = None) -> list[Trajectory]:
        """The episodes, at most `concurrency` at once, each given `deadline_s` from its start: one
        not finished by then is given up (`_overdue`), whether it ends later or never, and its place
        goes to the next; `progress(1)` as each is over. This module's own failure is raised here."""
        told = progress or (lambda n: None)
        cap = max(1, min(len(jobs), self.concurrency or len(jobs)))
        finished: queue.Queue = queue.Queue()  # (job, its trajectory or what this module raised, when)
        out: list[Trajectory | None] = [None] * len(jobs)
        due: dict[int, float] = {}  # running episodes -> when their time is up
        running: dict[int, Future | None] = {}  # their tasks on the loop (None: on a thread)
        started = 0
        while started < len(jobs) or due:
            while started < len(jobs) and len(due) < cap:
                due[started] = time.monotonic() + self.deadline_s if self.deadline_s > 0 else math.inf
                running[started] = self._start(started, jobs[started], finished)
                started += 1
            for i, result, at in _drain(finished, min(due.values()) - time.monotonic()):
                if isinstance(result, BaseException):
                    raise result
                if at <= due.get(i, -math.inf):
                    out[i] = result
                    del due[i]
                    told(1)
            now = time.monotonic()
            for i in [i for i, t in due.items() if t <= now]:
                out[i] = self._overdue(*jobs[i], running.pop(i))
                del due[i]
                told(1)
        return out

    def _start(self, i: int, job: tuple[Task, str], finished: queue.Queue) -> Future | None:
        """Episode `i` started on the runner; it puts `(i, result, when)` in `finished` as it ends."""
        if isinstance(self.runner, _Threads):
            self.runner.submit(self._thread, i, job, finished)
            return None
        future = self.runner.submit(self.episode_async(*job))

        def ended(f: Future) -> None:
            if not f.cancelled():  # cancelled: given up at its deadline, its trajectory already made
                finished.put((i, f.exception() or f.result(), time.monotonic()))
        future.add_done_callback(ended)
        return future

    def _thread(self, i: int, job: tuple[Task, str], finished: queue.Queue) -> None:
        try:
            result = self.episode(*job)
        except BaseException as e:  # noqa: BLE001 - this module's own failure, raised on the caller's thread
            result = e
        finished.put((i, result, time.monotonic()))

    def _overdue(self, task: Task, eid: str, running: Future | None = None) -> Trajectory:
        self.proxy.recorder.close(eid)  # what it recorded is dropped; its later calls are refused
        if running is not None:
            running.cancel()  # the async agent's task, cancelled where it awaits
        why = f"the agent ran past its episode deadline (rollout.agent.timeout_s: {self.deadline_s:g}s)"
        return Trajectory(task, (), error=why, infra_failure="agent")

    def episode(self, task: Task, eid: str) -> Trajectory:
        """The agent's episode as one trajectory, scored (several contexts when its calls did not
        extend each other, `Turn.restart`; truncated when the proxy refused a call past its budget)."""
        try:
            # frees this thread where the agent runs Python code, once `_run` has given the episode up
            with deadline(self.deadline_s and self.deadline_s + _GRACE_S, "agent episode"):
                returned = self.agent(_task_dict(task), self.proxy.base_url(eid))
            error = None
        except Exception as e:  # noqa: BLE001 - the agent program's failure costs its episode only
            returned, error = None, getattr(e, "why", None) or f"agent raised {type(e).__name__}: {e}"
        return self._finish(task, eid, returned, error)

    async def episode_async(self, task: Task, eid: str) -> Trajectory:
        """`episode` of an `async def` agent, awaited on the runner's loop; the verifier, if it scores,
        runs on a thread so the loop goes on."""
        try:
            returned, error = await self.agent(_task_dict(task), self.proxy.base_url(eid)), None
        except Exception as e:  # noqa: BLE001 - the agent program's failure costs its episode only
            returned, error = None, f"agent raised {type(e).__name__}: {e}"
        return await asyncio.to_thread(self._finish, task, eid, returned, error)

    def _finish(self, task: Task, eid: str, returned, error: str | None) -> Trajectory:
        """The recorded episode as its trajectory, rewarded by what the agent posted, else returned,
        else the env's verifier; an infrastructure failure when the agent failed."""
        episode = self.proxy.recorder.pop(eid)
        whole = trajectory(episode, task)
        if whole is None or (error is not None and not episode.truncated):  # raising on a refusal is no failure
            why = error or "the agent ended without calling the model"
            return Trajectory(task, (), error=why, infra_failure="agent")
        reward = episode.reward if episode.reward is not None else returned
        if reward is None:  # the env's verifier on the last reply
            return score_trajectory(self.reward_fn, whole, timeout_s=self.timeout_s)
        details = {"agent_reward": float(reward), "correct": float(reward >= 1.0)}  # accuracy: a full reward
        return dataclasses.replace(whole, reward=float(reward), reward_details=details)

    def sync(self, model, version: int, probe) -> None:
        return None  # the proxy serves the policy's own engine, which the trainer syncs

    def close(self) -> None:
        self.proxy.close()
        self.runner.close()
        if isinstance(self.agent, ProcessAgent):
            self.agent.close()


def load_agent(program: str, pool: str = "thread") -> Agent:
    """The agent `program` names (`rollout.agent.program`); `pool` `process`: a sync function runs in
    worker processes (`agent_process.ProcessAgent`), an `async def` on the event loop as ever."""
    fn = load_callable(program)
    return ProcessAgent(program) if pool == "process" and not inspect.iscoroutinefunction(fn) else fn


def _task_dict(task: Task) -> dict:
    return {"id": task.id, "prompt": task.prompt, "answer": task.answer, "meta": dict(task.meta)}


class _Threads:
    """Daemon threads that run sync agents' episodes, reused from episode to episode and step to
    step. A job goes to an idle thread, or to a new one when none is idle: a thread still held by an
    episode given up is not idle, so it is replaced, never waited for."""

    def __init__(self, name: str):
        self.name, self.jobs, self.lock = name, queue.SimpleQueue(), threading.Lock()
        self.idle = self.started = 0

    def submit(self, fn: Callable, *args) -> None:
        with self.lock:
            spawn = self.idle == 0
            self.idle -= not spawn
            self.started += spawn
        self.jobs.put((fn, args))
        if spawn:
            threading.Thread(target=self._work, name=f"{self.name}-{self.started}", daemon=True).start()

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            fn, args = job
            fn(*args)  # catches what it raises (`AgentRollouts._thread`)
            with self.lock:
                self.idle += 1

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, 0
        for _ in range(idle):
            self.jobs.put(None)


class _Loop:
    """An event loop on a daemon thread of its own, for async agents' episodes."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agentic-rl-agents", daemon=True)
        self.thread.start()

    def submit(self, coroutine) -> Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        def stop() -> None:
            for task in asyncio.all_tasks(self.loop):  # episodes given up whose agents swallowed the cancel
                task.cancel()
            self.loop.stop()
        self.loop.call_soon_threadsafe(stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():  # else an agent blocks it: left to its daemon thread
            self.loop.close()


def _drain(finished: queue.Queue, wait: float) -> list:
    """What `finished` holds, after waiting up to `wait` seconds (inf: until something comes) for it."""
    try:
        items = [finished.get(timeout=None if wait == math.inf else max(wait, 0.0))]
    except queue.Empty:
        return []
    while not finished.empty():
        items.append(finished.get_nowait())
    return items
