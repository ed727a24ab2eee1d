"""`rollout.agent.pool: process`: a sync agent function run in worker processes, not on the trainer's
threads, so a CPU-bound agent does not share the trainer's interpreter.

`ProcessAgent(program)` is called as the function is, `agent(task, base_url)`, on the thread the
episode runs on (`rollout/agents.py`); it hands the episode to an idle worker process and waits for
its answer. A worker loads the program once (`registry.load_callable`: the program must load in a
fresh interpreter, a module or a file path) and runs episode after episode, from step to step. Its
calls to the proxy are plain HTTP to the episode's `base_url`, as on a thread.

Failures cost their episode only. The function raising is answered with its type, message and
traceback (`AgentRaised`), and the worker goes on. A worker that dies (`os._exit`, a signal, the OOM
killer) ends its episode (`WorkerDied`, with its exit code) and is not reused. An episode that runs
past its deadline is stopped where it waits here (the episode's timer raises in this thread,
`faults.deadline`), and its worker is killed, whatever it was doing, and replaced by a fresh one when
the next episode needs it. A worker is a fresh interpreter (`python -m agentic_rl.rollout.agent_process`:
nothing of the trainer's threads, CUDA state or main module inherited, nor torch imported), with the
trainer's environment and import path as they are when it starts. The workers `AgentRollouts` starts
ahead (`rollout.agent.concurrency` of them) have loaded the program before the first episode begins;
a replacement's start (an interpreter and the program's imports: seconds) counts in its episode's time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

_POLL_S = 0.05  # how often a waiting thread looks up (the episode's timer raises between two looks)


class AgentRaised(Exception):
    """The agent function raised in its worker: `why` holds its type, message and traceback."""

    def __init__(self, what: str, trace: str):
        super().__init__(what)
        self.why = f"agent raised {what}\n{trace}"


class WorkerDied(Exception):
    def __init__(self, code: int | None):
        super().__init__(f"the agent's worker process died (exit code {code})")
        self.why = str(self)


def _serve(program: str, jobs: Connection, answers: Connection) -> None:
    """A worker's life: load the program, then run each episode sent until told to stop."""
    try:
        from agentic_rl.registry import load_callable

        fn, failed = load_callable(program), None
    except Exception as e:  # noqa: BLE001 - every episode is answered with it
        fn, failed = None, (f"{type(e).__name__}: {e}", traceback.format_exc())
    answers.send(("ready", None))
    while (job := _recv(jobs)) is not None:
        if failed:
            answers.send(("raised", failed))
            continue
        try:
            returned = fn(*job)
            answers.send(("ok", returned))
        except Exception as e:  # noqa: BLE001 - the agent's failure costs its episode only
            answers.send(("raised", (f"{type(e).__name__}: {e}", traceback.format_exc())))


def _recv(conn: Connection) -> Any:
    try:
        return conn.recv()
    except EOFError:  # the trainer is gone
        return None


class _Worker:
    """A fresh interpreter (`python -m agentic_rl.rollout.agent_process`), with the trainer's
    environment and import path, that talks over two pipes of its own (so the agent's prints on
    stdout are its own business)."""

    def __init__(self, program: str):
        self.answers, child_writes = _pipe()
        child_reads, self.jobs = _pipe()
        args = [program, str(child_reads.fileno()), str(child_writes.fileno()), json.dumps(sys.path)]
        self.process = subprocess.Popen([sys.executable, "-m", __name__, *args],
                                        pass_fds=(child_reads.fileno(), child_writes.fileno()))
        child_reads.close()
        child_writes.close()  # only the worker holds these ends: its death is an EOF here

    @property
    def pid(self) -> int:
        return self.process.pid

    def ready(self, wait_s: float) -> None:
        """Wait for the worker's word that it has loaded the program (or for `wait_s`, or its death)."""
        if self.answers.poll(wait_s):
            try:
                self.answers.recv()  # ("ready", None)
            except EOFError:
                pass  # dead: its first episode says so

    def ask(self, task: dict, base_url: str) -> Any:
        """The function's answer for one episode (raising as it raised, or `WorkerDied`)."""
        self.jobs.send((task, base_url))
        while True:
            if not self.answers.poll(_POLL_S):
                if self.process.poll() is not None and not self.answers.poll():  # its end held elsewhere
                    raise WorkerDied(self.process.returncode)
                continue
            try:
                kind, value = self.answers.recv()
            except EOFError:
                raise WorkerDied(self.process.wait(5)) from None
            if kind == "ok":
                return value
            if kind == "raised":
                raise AgentRaised(*value)  # "ready": the worker has loaded the program; go on waiting

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.jobs.close()
        self.answers.close()

    def stop(self) -> None:
        try:
            self.jobs.send(None)
            self.process.wait(2)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


def _pipe() -> tuple[Connection, Connection]:
    """(read end, write end) of an OS pipe, as `multiprocessing` connections (pickles, framed)."""
    r, w = os.pipe()
    return Connection(r, writable=False), Connection(w, readable=False)


class ProcessAgent:
    """A sync agent function `program` ("module:function" or "file.py:function") run in worker
    processes, reused from episode to episode; one a concurrent episode, started as needed."""

    def __init__(self, program: str):
        self.program, self.lock = program, threading.Lock()
        self.idle: list[_Worker] = []
        self.pids: set[int] = set()  # every worker started (tests and reports)

    def start(self, n: int, wait_s: float = 60.0) -> None:
        """Start `n` more workers ahead of the episodes, and wait (up to `wait_s`) for them to have loaded
        the program, so their start does not count in the first episodes' time."""
        workers = [self._new() for _ in range(n)]
        for worker in workers:
            worker.ready(wait_s)
        with self.lock:
            self.idle.extend(workers)

    def _new(self) -> _Worker:
        worker = _Worker(self.program)
        with self.lock:
            self.pids.add(worker.pid)
        return worker

    def __call__(self, task: dict, base_url: str) -> Any:
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        worker = worker or self._new()
        answered = False
        try:
            try:
                returned = worker.ask(task, base_url)
            except AgentRaised:
                answered = True  # the worker lives on
                raise
            answered = True
            return returned
        finally:
            if answered:
                with self.lock:
                    self.idle.append(worker)
            else:  # it died, or the episode's deadline stopped the wait: whatever it runs, it ends here
                worker.kill()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.stop()


if __name__ == "__main__":  # a worker: program, its two pipes' descriptors, the trainer's import path
    sys.path[:] = json.loads(sys.argv[4])
    _serve(sys.argv[1], Connection(int(sys.argv[2]), writable=False), Connection(int(sys.argv[3]), readable=False))
