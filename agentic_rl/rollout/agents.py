"""`rollout.agent`: a step's episodes run by an agent program of the user's own, through the
recording proxy.

The agent is a Python callable, `"module:function"` or `"path/to/file.py:function"`, called once per
episode as `function(task, base_url)`: `task` is a dict (`id`, `prompt`, `answer`, `meta`) and
`base_url` the proxy's OpenAI base URL for that episode (`http://127.0.0.1:PORT/episodes/ID/v1`:
the episode id travels in the path, so a plain `openai.OpenAI(base_url=base_url)` client records
under it). It returns the episode's reward (a number), or posts it to `/episodes/ID/reward`, or
returns None to have the env's verifier score the episode's last reply.

The proxy (`engines/server.py` in recording mode) serves the policy's own engine with the recipe's
sampling parameters, whatever the agent asks, so the recorded logprobs are the ones the loss needs.
The episodes of a step run concurrently, each on a thread, so the server batches their calls.

Limits: the proxy holds each episode to the recipe's budget (`rollout.max_turns` calls,
`rollout.max_episode_tokens` generated tokens; `engines/recorder.Limits`): a call past it is
refused and the episode is a truncation, trained as the rollout loop trains one, whether the agent
then returns a reward or raises on the refusal (the env's verifier then scores its last reply). An
episode still running `rollout.agent.timeout_s` after it started is given up: the step goes on
without it, its calls are refused from then on, and the thread it ran on is left to end (a daemon;
a timer raises in it where it runs Python code). That, an agent that raises (before any budget
refused it), and one that ends without calling the model are the infrastructure's failure
(`faults.py`, kind `agent`): the episode trains nothing.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.managed import free_port
from agentic_rl.engines.recorder import Limits, Recorder, trajectory
from agentic_rl.faults import deadline
from agentic_rl.rewards.scoring import score_trajectory
from agentic_rl.rollout.backends import Episodes, Progress
from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

Agent = Callable[[dict, str], "float | None"]
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
        """`episodes`: the recipe's sampling, reward and budget; `deadline_s`: an episode's time from
        its start (0: none); `concurrency`: episodes run at once (0: all of a call's); `history`:
        `Recorder`'s; `label`: the episode ids' prefix."""
        self.agent, self.reward_fn, self.deadline_s, self.concurrency = agent, episodes.reward, deadline_s, concurrency
        self.label = label
        self.timeout_s = episodes.budget.step_timeout_s  # the verifier's
        limits = Limits(episodes.budget.max_turns, episodes.budget.max_episode_tokens)
        self.proxy = Proxy(engine, tokenizer, episodes.params, history, limits)

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
        """The episodes, each on a daemon thread, at most `concurrency` at once, each given
        `deadline_s` from its start: one not finished by then is given up (`_overdue`), whether it
        ends later or never, and its place goes to the next; `progress(1)` as each is over. This
        module's own failure is raised here."""
        told = progress or (lambda n: None)
        cap = max(1, min(len(jobs), self.concurrency or len(jobs)))
        finished: queue.Queue = queue.Queue()  # (job, its trajectory or what this module raised, when)
        out: list[Trajectory | None] = [None] * len(jobs)
        due: dict[int, float] = {}  # running episodes -> when their time is up
        started = 0
        while started < len(jobs) or due:
            while started < len(jobs) and len(due) < cap:
                due[started] = time.monotonic() + self.deadline_s if self.deadline_s > 0 else math.inf
                threading.Thread(target=self._thread, args=(started, jobs[started], finished), daemon=True,
                                 name=f"agentic-rl-agent-{jobs[started][1]}").start()
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
                out[i] = self._overdue(*jobs[i])
                del due[i]
                told(1)
        return out

    def _thread(self, i: int, job: tuple[Task, str], finished: queue.Queue) -> None:
        try:
            result = self.episode(*job)
        except BaseException as e:  # noqa: BLE001 - this module's own failure, raised on the caller's thread
            result = e
        finished.put((i, result, time.monotonic()))

    def _overdue(self, task: Task, eid: str) -> Trajectory:
        self.proxy.recorder.close(eid)  # what it recorded is dropped; its later calls are refused
        why = f"the agent ran past its episode deadline (rollout.agent.timeout_s: {self.deadline_s:g}s)"
        return Trajectory(task, (), error=why, infra_failure="agent")

    def episode(self, task: Task, eid: str) -> Trajectory:
        """The agent's episode as one trajectory, scored (several contexts when its calls did not
        extend each other, `Turn.restart`; truncated when the proxy refused a call past its budget)."""
        recorder = self.proxy.recorder
        try:
            # frees this thread where the agent runs Python code, once `_run` has given the episode up
            with deadline(self.deadline_s and self.deadline_s + _GRACE_S, "agent episode"):
                returned = self.agent({"id": task.id, "prompt": task.prompt, "answer": task.answer,
                                       "meta": dict(task.meta)}, self.proxy.base_url(eid))
            error = None
        except Exception as e:  # noqa: BLE001 - the agent program's failure costs its episode only
            returned, error = None, f"agent raised {type(e).__name__}: {e}"
        episode = recorder.pop(eid)
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
        return None  # the proxy serves the policy's own engine

    def close(self) -> None:
        self.proxy.close()


def _drain(finished: queue.Queue, wait: float) -> list:
    """What `finished` holds, after waiting up to `wait` seconds (inf: until something comes) for it."""
    try:
        items = [finished.get(timeout=None if wait == math.inf else max(wait, 0.0))]
    except queue.Empty:
        return []
    while not finished.empty():
        items.append(finished.get_nowait())
    return items
