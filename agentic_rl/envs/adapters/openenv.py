"""Meta's OpenEnv environments (`openenv-core`) as agent envs (`env: {name: "openenv:MODULE:APP"}`;
docs/envs/openenv.md).

`MODULE:APP` is the environment's FastAPI server app (what `create_app` made; `server.app:app` in
an `openenv init` layout). The adapter serves it as a user does — `python -m uvicorn MODULE:APP` on a
free loopback port, in `env.options.cwd` — once per process, on the first episode, and stops it at
exit (`stop_servers()`; the server also dies with this process). Each episode is a session of
openenv's own `GenericEnvClient` (its WebSocket reset/step protocol): `reset(seed=...)` with the
task's seed, then one `step({action_field: text})` per call of the tool `act(action)`. The
observation's text is its `observation_field`, or its fields but `done`, `reward` and `metadata`.
The server's `done` ends the episode, and the sum of its rewards is the return (the Gymnasium
adapter's `GymReturn`); a policy that stops calling `act` first is truncated with the return so far.

Options: `cwd`, `action_field` (message), `observation_field`, `describe`, `success` (1.0),
`format` (hermes), `startup_s` (120: openenv's server imports gradio, slow on a loaded machine).
A server or connection that fails during a step is an infrastructure failure (the episode trains
nothing), never the policy's error.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentic_rl.envs.adapters.gymnasium import SPLIT_SEEDS, GymReturn
from agentic_rl.envs.base import StepResult, ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.faults import InfrastructureError
from agentic_rl.types import Task

OPTIONS = ("cwd", "action_field", "observation_field", "describe", "success", "format", "startup_s")
_HIDDEN = ("done", "reward", "metadata")


def _die_with_parent() -> None:
    """In the server's process: SIGTERM when the process that started it dies (Linux), so a killed
    run leaves no server behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Server:
    """One uvicorn process serving an OpenEnv app on loopback."""

    def __init__(self, app: str, cwd: str, startup_s: float):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(self.port),
                   "--log-level", "critical", "--timeout-graceful-shutdown", "2"]
        # its log goes to a file (a pipe nobody reads fills up and blocks the server), critical only:
        # openenv's server logs a traceback for every client that closes its session
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=self.log,
                                        preexec_fn=_die_with_parent)
        self._wait(app, cwd, startup_s)

    def _wait(self, app: str, cwd: str, startup_s: float) -> None:
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"openenv server {app} exited with {self.process.returncode} (run `python -m "
                                   f"uvicorn {app}` in {cwd} to see why): {self.log.read().decode()[-2000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"openenv server {app} did not answer /health within {startup_s:g}s")

    def stop(self) -> None:
        self.log.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_SERVERS: dict[tuple[str, str], Server] = {}
_LOCK = threading.Lock()


def server(app: str, cwd: str, startup_s: float = 120.0) -> Server:
    """The process's server of `app` run in `cwd`, started on first use."""
    key = (app, str(Path(cwd).resolve()))
    with _LOCK:
        if key not in _SERVERS or _SERVERS[key].process.poll() is not None:
            _SERVERS[key] = Server(app, key[1], startup_s)
        return _SERVERS[key]


@atexit.register
def stop_servers() -> None:
    """Stop every server this process started."""
    with _LOCK:
        for s in _SERVERS.values():
            s.stop()
        _SERVERS.clear()


def observation_text(observation: Mapping[str, Any], field: str | None) -> str:
    """An observation as text: the named field, the one field there is, or `key: value` lines."""
    if field:
        return str(observation.get(field, ""))
    shown = {k: v for k, v in observation.items() if k not in _HIDDEN}
    if len(shown) == 1:
        return str(next(iter(shown.values())))
    return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in shown.items())


class OpenEnvEnv(ToolEnv):
    """One episode: a client session on the app's server."""

    def __init__(self, app: str, options: Mapping[str, Any]):
        self.app, self.options = app, options
        self.action_field = options.get("action_field", "message")
        self.client, self.done, self.total = None, False, 0.0
        system = (f"{options.get('describe', '')} Act by calling act with your action; the environment answers "
                  "each call. Stop calling when you are done.")
        super().__init__([self.act], " ".join(system.split()), format=get_format(options.get("format", "hermes")))

    def reset(self, task: Task) -> list[dict]:
        from openenv import GenericEnvClient

        self.close()
        url = server(self.app, self.options.get("cwd", "."), float(self.options.get("startup_s", 120))).url
        self.client = GenericEnvClient(base_url=url, connect_timeout_s=60).sync()  # roomy: a loaded machine
        first = self.client.reset(seed=int(task.meta["seed"]))
        self.done, self.total = first.done, 0.0
        messages = super().reset(task)
        return [*messages[:-1], {"role": "user", "content": f"{task.prompt}\n\n{self.view(first.observation)}"}]

    def view(self, observation: Mapping[str, Any]) -> str:
        return observation_text(observation, self.options.get("observation_field"))

    def act(self, action: str) -> str:
        """Take one action in the environment; returns what it observes.

        Args:
            action: the action, as text.
        """
        if self.done:
            raise ValueError("the episode is over")
        try:
            result = self.client.step({self.action_field: action})
        except Exception as e:  # the server or the connection failed, not the action: the machine's fault
            raise InfrastructureError(f"openenv server {self.app}: {type(e).__name__}: {e}") from e
        self.total += float(result.reward or 0.0)
        self.done = bool(result.done)
        return self.view(result.observation) + (f"\nThe episode is over; return {self.total:g}." if self.done else "")

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if self.done:  # the server decides when the episode ends
            return dataclasses.replace(result, observation=(), reward=self.total, terminated=True)
        if result.terminated:  # the policy stopped first: the return so far, cut short
            return dataclasses.replace(result, reward=self.total, terminated=False, truncated=True)
        return result

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):  # a session the server already dropped
                self.client.close()
            self.client = None


def openenv_spec(app: str) -> EnvSpec:
    """The EnvSpec of OpenEnv app `MODULE:APP`; its tasks are reset seeds (the Gymnasium adapter's)."""
    def tasks(split: str, n: int, seed: int) -> list[Task]:
        base = SPLIT_SEEDS[split] + seed * 10_007
        return [Task(id=f"openenv-{split}-{base + i}", prompt=f"Episode {base + i}.", meta={"seed": base + i, "split": split})
                for i in range(n)]
    return EnvSpec(name=f"openenv:{app}", make_env=lambda options: OpenEnvEnv(app, options),
                   make_reward=lambda options: GymReturn(float(options.get("success", 1.0))), tasks=tasks,
                   splits=tuple(SPLIT_SEEDS), options=OPTIONS)
