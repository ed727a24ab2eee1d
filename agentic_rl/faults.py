"""Whose fault a failure is, and fault isolation: a deadline for code that may hang.

Every failure an episode meets is either the policy's or the machine's, and the two are trained on
differently:

  the policy's (scored as the env says, and trained on: excluding them would be a reward hack, since
  a policy could then escape a negative advantage by making its episode crash):
    - a malformed action, a call of an unknown tool, bad arguments;
    - a tool call the tool rejects (it raises, or returns an error);
    - the agent's own code timing out, crashing or exhausting its limits in the sandbox;
    - running out of turns or tokens (a truncation);
    - an answer the verifier cannot read (`Score.error`);

  the infrastructure's (`Trajectory.infra_failure` names the kind; the episode leaves its group's
  statistics and the loss, and a group left with fewer than two scored episodes trains nothing):
    - `reset`: the env's reset raised (tried twice);
    - `env_step`: the env's step raised, hung past `rollout.step_timeout_s` or returned garbage;
    - `reward`: the reward function raised, hung or returned garbage (tried twice);
    - `sandbox_start`: the code sandbox could not start (`SandboxUnavailable`);
    - `tool_backend`: a tool's backend failed (a tool raises `InfrastructureError`; tried twice);
    - `engine`: a served engine could not sample the episode's next action (tried twice);
    - `worker`: a Ray rollout worker died with the episode (`trainer/workers.py`);
    - `agent`: an agent program trained through the recording proxy raised, never called the
      model, or ran past `rollout.agent.timeout_s` (`rollout/agents.py`; an agent returns a low
      reward for what the policy got wrong, and a refusal at the episode's budget is a truncation).
    - `judge`: an LLM judge could not grade the episode: its engine raised or timed out, or it wrote
      no score (`rewards/judge.py`, `JudgeError`; tried twice, as every reward is).

A tool or env signals the machine's fault by raising `InfrastructureError` (or a subclass); any
other exception from a tool is the policy's call going wrong.

`deadline(seconds)` raises `Timeout` inside the guarded block when it runs too long (seconds <= 0:
no limit). On the main thread it uses the process's interval timer (SIGALRM), which interrupts
pure-Python loops, sleeps and blocking I/O. On another thread (the rollout producer of
`rl.max_staleness` > 0) a timer thread raises `Timeout` in the guarded thread asynchronously: that
interrupts Python code, but not a blocking system call until it returns. A tool call inside an env
has its own, thread-based limit (`ToolEnv(timeout_s=...)`), and sandboxed code its own wall-clock
kill; this is the outer guard for env and reward code we did not write.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading


class Timeout(Exception):
    pass


class InfrastructureError(Exception):
    """A failure of the machine, not of the policy's action (`kind` names it; see the module doc)."""

    kind = "tool_backend"


INFRA_KINDS = ("reset", "env_step", "reward", "sandbox_start", "tool_backend", "engine", "worker", "agent", "judge")


@contextlib.contextmanager
def deadline(seconds: float, what: str = "call"):
    if seconds <= 0:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        with _thread_deadline(seconds, what):
            yield
        return

    def expire(signum, frame):
        raise Timeout(f"{what} exceeded {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _thread_deadline(seconds: float, what: str):
    """`Timeout` raised in this thread by a timer, unless the block ended first (a lock decides)."""
    target, lock, state = threading.get_ident(), threading.Lock(), {"open": True}

    def expire() -> None:
        with lock:
            if state["open"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(_ThreadTimeout))

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except _ThreadTimeout:
        raise Timeout(f"{what} exceeded {seconds:g}s") from None
    finally:
        with lock:
            state["open"] = False
        timer.cancel()


class _ThreadTimeout(Timeout):
    """What the timer raises (a class: an asynchronous exception cannot carry a message)."""
