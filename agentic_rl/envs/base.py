"""The Env protocol (one instance per episode) and `ToolEnv`, an env made of typed Python functions."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentic_rl.envs.formats import HERMES, ToolFormat
from agentic_rl.faults import InfrastructureError
from agentic_rl.tools.schema import function_schema, validate_arguments
from agentic_rl.types import Task, ToolCall


@dataclass(frozen=True)
class StepResult:
    """observation: chat messages shown to the policy next (tool results); empty when the episode ends.
    terminated: the episode reached its end (a final answer); truncated: a limit cut it short."""

    observation: tuple[Mapping[str, Any], ...] = ()
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    malformed_calls: int = 0
    tool_errors: int = 0
    info: Mapping[str, Any] = field(default_factory=dict)


class Env(Protocol):
    """One instance per episode. An env holding resources (a sandbox worker, a connection) also
    defines `close()`, which the rollout calls when the episode ends; it must be idempotent. An env
    doing I/O may define `async def astep(action)` instead of `step`: the rollout awaits it on a
    shared background event loop."""

    format: ToolFormat
    tool_schemas: Sequence[Mapping[str, Any]]

    def reset(self, task: Task) -> list[dict]: ...

    def step(self, action: str) -> StepResult: ...


def close_env(env) -> None:
    """Release what an episode's env holds (`close()` is optional and idempotent)."""
    close = getattr(env, "close", None)
    if close is not None:
        close()


# Tool calls run on a shared pool so a hanging tool costs a thread, never the episode. A Python
# thread cannot be killed: tools that may hang for good belong in the sandbox (a process).
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="agentic-rl-tool")


class ToolEnv:
    """A tool env from typed functions: the schema comes from each signature and docstring.

    An action with no tool call ends the episode (it is the final answer). A malformed call, an
    unknown tool, bad arguments, a tool that raises or exceeds `timeout_s`: each becomes an error
    observation the model reads, and the episode goes on.
    """

    def __init__(
        self,
        tools: Sequence[Callable[..., Any]],
        system_prompt: str,
        fewshot: Sequence[Mapping[str, Any]] = (),
        format: ToolFormat = HERMES,
        timeout_s: float = 5.0,
        max_result_chars: int = 1000,
    ):
        self.tools = {fn.__name__: fn for fn in tools}
        self.tool_schemas = [function_schema(fn) for fn in tools]
        self.system_prompt = system_prompt
        self.fewshot = list(fewshot)
        self.format = format
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        self.task: Task | None = None

    def reset(self, task: Task) -> list[dict]:
        self.task = task
        return [{"role": "system", "content": self.system_prompt}, *self.fewshot, {"role": "user", "content": task.prompt}]

    def step(self, action: str) -> StepResult:
        parsed = self.format.parse(action)
        if parsed.is_final:
            return StepResult(terminated=True)
        messages = [{"role": "tool", "name": "error", "content": f"Error: {e}"} for e in parsed.errors]
        errors = len(parsed.errors)
        for call in parsed.tool_calls:
            try:
                content, ok = self._call_retrying(call)
            except InfrastructureError as e:  # the machine's fault: the episode ends and trains nothing
                return StepResult(truncated=True, tool_calls=parsed.tool_calls, info={
                    "error": f"{call.name}: {type(e).__name__}: {e}", "infra_failure": e.kind})
            errors += not ok
            messages.append({"role": "tool", "name": call.name, "content": content})
        return StepResult(observation=tuple(messages), tool_calls=parsed.tool_calls,
                          malformed_calls=len(parsed.errors), tool_errors=errors)

    def _call_retrying(self, call: ToolCall) -> tuple[str, bool]:
        """A call whose backend failed (`InfrastructureError`) is tried once more."""
        try:
            return self._call(call)
        except InfrastructureError:
            return self._call(call)

    def _call(self, call: ToolCall) -> tuple[str, bool]:
        fn = self.tools.get(call.name)
        if fn is None:
            return f"Error: unknown tool {call.name!r}; available: {', '.join(self.tools)}", False
        problem = validate_arguments(fn, dict(call.arguments))
        if problem:
            return f"Error: {problem}", False
        future = _POOL.submit(fn, **call.arguments)
        try:
            result = future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return f"Error: {call.name} timed out after {self.timeout_s:g}s", False
        except InfrastructureError:
            raise
        except Exception as e:  # a raising tool is the model's problem to read, not ours to crash on
            return f"Error: {call.name} raised {type(e).__name__}: {e}"[: self.max_result_chars], False
        text = str(result)
        return text[: self.max_result_chars], not text.startswith("Error")
