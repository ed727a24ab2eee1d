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
An agent that raises, or ends without calling the model, is the infrastructure's failure
(`faults.py`): the episode trains nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.managed import free_port
from agentic_rl.engines.recorder import Recorder, trajectory
from agentic_rl.rewards.scoring import score_trajectory
from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

Agent = Callable[[dict, str], "float | None"]


def load_agent(spec: str) -> Agent:
    """`module:function` or `path/to/file.py:function`."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise ValueError(f"rollout.agent: expected 'module:function' or 'file.py:function', got {spec!r}")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if module_spec is None or not Path(target).exists():
            raise ValueError(f"rollout.agent: no such file {target!r}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"rollout.agent: {target!r} has no function {name!r}")
    return fn


class Proxy:
    """The recording server over `engine`, on a free local port, on a thread of its own."""

    def __init__(self, engine, tokenizer, sampling: SamplingParams | None, history: str = "keep"):
        import uvicorn

        from agentic_rl.engines.server import create_app

        self.recorder = Recorder(tokenizer, engine.eos_ids, history)
        self.port = free_port()
        app = create_app(engine, tokenizer, recorder=self.recorder, sampling=sampling)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, name="agentic-rl-proxy", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the recording proxy did not start on port {self.port}")
            time.sleep(0.05)

    def base_url(self, episode: str) -> str:
        return f"http://127.0.0.1:{self.port}/episodes/{episode}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class AgentRollouts:
    """A step's groups from the agent's episodes: `rollout(tasks, G, seed)`."""

    def __init__(self, agent: Agent, engine, tokenizer, sampling: SamplingParams, reward_fn, timeout_s: float = 0.0,
                 concurrency: int = 0, history: str = "keep"):
        """`concurrency`: episodes run at once (0: all of a call's); `history`: `Recorder`'s."""
        self.agent, self.reward_fn, self.timeout_s, self.concurrency = agent, reward_fn, timeout_s, concurrency
        self.proxy = Proxy(engine, tokenizer, sampling, history)

    def rollout(self, tasks: Sequence[Task], G: int, seed: int,
                label: str = "s") -> tuple[list[TrajectoryGroup], RolloutStats]:
        """`G` episodes of each task (ids `{label}{seed}-t{i}-g{j}`), scored."""
        start = time.perf_counter()
        ids = [[f"{label}{seed}-t{i}-g{j}" for j in range(G)] for i in range(len(tasks))]
        jobs = [(t, eid) for t, row in zip(tasks, ids) for eid in row]
        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), self.concurrency or len(jobs)))) as pool:
            done = list(pool.map(lambda job: self.episode(*job), jobs))
        groups = [TrajectoryGroup(t, tuple(done[i * G:(i + 1) * G])) for i, t in enumerate(tasks)]
        generated = sum(t.num_generated for g in groups for t in g.trajectories)
        return groups, RolloutStats(time.perf_counter() - start, len(jobs), generated)

    def episode(self, task: Task, eid: str) -> Trajectory:
        """The agent's episode as one trajectory, scored (several contexts when its calls did not
        extend each other, `Turn.restart`)."""
        recorder = self.proxy.recorder
        try:
            returned = self.agent({"id": task.id, "prompt": task.prompt, "answer": task.answer,
                                   "meta": dict(task.meta)}, self.proxy.base_url(eid))
            error = None
        except Exception as e:  # noqa: BLE001 - the agent program's failure costs its episode only
            returned, error = None, f"agent raised {type(e).__name__}: {e}"
        episode = recorder.pop(eid)
        whole = trajectory(episode, task)
        if error is not None or whole is None:
            why = error or "the agent ended without calling the model"
            return Trajectory(task, (), error=why, infra_failure="agent")
        reward = episode.reward if episode.reward is not None else returned
        if reward is None:  # the env's verifier on the last reply
            return score_trajectory(self.reward_fn, whole, timeout_s=self.timeout_s)
        details = {"agent_reward": float(reward), "correct": float(reward >= 1.0)}  # accuracy: a full reward
        return dataclasses.replace(whole, reward=float(reward), reward_details=details)

    def close(self) -> None:
        self.proxy.close()
