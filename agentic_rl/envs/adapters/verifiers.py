"""Prime Intellect's `verifiers` (v0.4, the `verifiers.v1` API) environments as agent envs
(`env: {name: "vf:TASKSET_ID"}` or `"vf:module:function"`; docs/envs/verifiers.md).

`vf:TASKSET_ID` loads what `vf eval TASKSET_ID` loads — `vf.load_environment` of the taskset's
package (its `Taskset`, and its own `Env` when it exports one); `vf:module:function` (or
`file.py:function`) calls a function returning a `vf.Env` or a `vf.Taskset`. Our rollout loop plays
the env's trainable agent:

- tasks are the taskset's tasks, every tenth (by its place in `load()`) held out (`heldout`), the
  others `train`, drawn by seed; the system prompt and prompt are the task's;
- tools are the `@vf.tool` methods of the task's and the taskset's `Toolset`s, called in-process;
- the multi-turn logic of an `Env` subclass (`run(task, agents)`: it sends the agent messages with
  `interaction.turn(message)` and reads its replies) runs on a thread of its own: each reply the
  policy ends a turn with goes to it, and the message it sends next is the observation; the episode
  ends when `run` returns;
- the reward is the task's own scoring (`Task.score`: its `@vf.reward` functions with their weights,
  its judges) on a `vf.Trace` of the episode's transcript; each reward's score is a detail.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import queue
import random
import threading
from collections.abc import Mapping
from typing import Any

from agentic_rl.envs.base import StepResult, ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.registry import load_callable
from agentic_rl.rewards.base import Score
from agentic_rl.tools.schema import function_schema
from agentic_rl.types import Task, Trajectory

OPTIONS = ("format",)
_DONE = object()  # the env's `run` returned: the episode is over


def _run(coro):
    """A coroutine to completion on a fresh event loop, off any loop the caller runs in."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclasses.dataclass
class Source:
    """What `vf:ARGUMENT` names: the taskset, and the env whose `run` drives a multi-turn episode
    (None for a plain taskset: `SingleAgentEnv`, one agent answering)."""

    taskset: Any
    env: Any = None

    @functools.cached_property
    def tasks(self) -> list:
        if not self.taskset.bounded:
            raise ValueError(f"{type(self.taskset).__name__} is infinite: bound it (taskset.take(n)) in the function")
        return list(self.taskset)

    @property
    def agent(self) -> str:
        """The trainable agent's name (the one role the rollout plays)."""
        names = list(self.env._agent_specs)
        if len(names) != 1:
            raise ValueError(f"{type(self.env).__name__} has agents {names}: the adapter plays an env of one agent")
        return names[0]


def load_source(argument: str) -> Source:
    import verifiers.v1 as vf

    if ":" in argument:
        made = load_callable(argument, "env.name")()
    else:
        made = vf.load_environment(vf.resolve_env_config({"taskset": {"id": argument}}))
    if isinstance(made, vf.Taskset):
        return Source(made)
    if not isinstance(made, vf.Env):
        raise TypeError(f"vf:{argument}: expected a verifiers Env or Taskset, got {type(made).__name__}")
    return Source(made.taskset, None if isinstance(made, vf.SingleAgentEnv) else made)


def tool_functions(vf_task, taskset) -> list:
    """The `@vf.tool` methods of the task's and its taskset's toolsets, as plain functions (an async
    tool runs to completion on its own loop)."""
    from verifiers.v1.utils.decorators import discover_decorated

    def plain(method):
        @functools.wraps(method)
        def call(**kwargs):
            result = method(**kwargs)
            return _run(result) if asyncio.iscoroutine(result) else result
        call.__name__ = getattr(method, "tool_name", None) or method.__name__
        return call
    toolsets = [*type(vf_task).toolsets(vf_task.config), *type(taskset).toolsets(taskset.config)]
    return [plain(fn) for toolset in toolsets for fn in discover_decorated(toolset, "tool")]


def opening(data) -> list[dict]:
    """The task's first messages: its system prompt, its prompt (text or messages)."""
    system = [{"role": "system", "content": data.system_prompt or ""}]
    if data.prompt is None:
        return system
    if isinstance(data.prompt, str):
        return [*system, {"role": "user", "content": data.prompt}]
    return [*system, *(m.model_dump(exclude_none=True) for m in data.prompt)]


class Conversation:
    """A verifiers `Env.run` on a thread of its own, the rollout playing its one agent: `turn(m)`
    hands `m` to the rollout and waits for the policy's reply. An exception in `run` is raised to
    the rollout (the env's failure); after `close` every turn comes back terminated."""

    def __init__(self, source: Source, vf_task):
        self.inbox, self.outbox = queue.Queue(), queue.Queue()
        self.closed, self.error = False, None
        agents = type("Agents", (), {source.agent: self})()
        self.thread = threading.Thread(target=self._main, args=(source.env, vf_task, agents),
                                       name="vf-env-run", daemon=True)
        self.thread.start()

    def _main(self, env, vf_task, agents) -> None:
        try:
            asyncio.run(env.run(vf_task, agents))
        except Exception as e:  # noqa: BLE001 - handed to the rollout, which records the env's failure
            self.error = e
        finally:
            self.outbox.put(_DONE)

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        yield self

    async def turn(self, message=None):
        from verifiers.v1 import AssistantMessage
        from verifiers.v1.agent import Segment

        if self.closed:
            return Segment(messages=[], terminated=True)
        self.outbox.put(message)
        reply = await asyncio.to_thread(self.inbox.get)
        if reply is _DONE:
            return Segment(messages=[], terminated=True)
        return Segment(messages=[AssistantMessage(content=reply)])

    def next_message(self):
        """The env's next message to the agent (None: answer the prompt as it is), or _DONE."""
        message = self.outbox.get()
        if message is _DONE and self.error is not None:
            raise RuntimeError(f"{type(self.error).__name__} in the env's run: {self.error}") from self.error
        return message

    def reply(self, text: str):
        self.inbox.put(text)
        return self.next_message()

    def close(self) -> None:
        self.closed = True
        if self.thread.is_alive():
            self.inbox.put(_DONE)
            self.thread.join(timeout=5)


def reply_text(fmt, action: str) -> str:
    """What an action says, as a verifiers assistant message's content: its prose, without the
    end-of-turn token or the calls."""
    return fmt.prose(action.removesuffix(fmt.end_of_turn)).strip()


class VerifiersEnv(ToolEnv):
    """One episode of a verifiers task: its tools, and its env's multi-turn `run` if it has one."""

    def __init__(self, source: Source, options: Mapping[str, Any]):
        self.source, self.conversation = source, None
        super().__init__([], "", format=get_format(options.get("format", "hermes")))

    def reset(self, task: Task) -> list[dict]:
        self.close()
        vf_task = self.source.tasks[task.meta["idx"]]
        tools = tool_functions(vf_task, self.source.taskset)
        self.tools, self.task = {fn.__name__: fn for fn in tools}, task
        self.tool_schemas = [function_schema(fn) for fn in tools]
        messages = opening(vf_task.data)
        if self.source.env is not None:
            self.conversation = Conversation(self.source, vf_task)
            first = self.conversation.next_message()
            if first is _DONE:
                raise RuntimeError(f"{type(self.source.env).__name__}.run ended before the agent's first turn")
            if first is not None:
                messages.append({"role": "user", "content": str(first)})
        return messages

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if not result.terminated or self.conversation is None:
            return result
        message = self.conversation.reply(reply_text(self.format, action))
        if message is _DONE:
            return result
        return dataclasses.replace(result, terminated=False, observation=({"role": "user", "content": str(message)},))

    def close(self) -> None:
        if self.conversation is not None:
            self.conversation.close()
            self.conversation = None


def transcript(trajectory: Trajectory, vf_task, fmt) -> list:
    """The episode as verifiers messages: the task's opening, then each action (its prose and its
    calls) and what answered it — tool results after calls (one message per action: the results of
    several calls in one action read as one), the env's next message after a reply."""
    import verifiers.v1 as vf
    from pydantic import TypeAdapter

    adapter = TypeAdapter(vf.Message)
    messages = [adapter.validate_python(m) for m in opening(vf_task.data)]
    turns = [t for t in trajectory.turns if not t.restart or t is trajectory.turns[0]]
    for k, turn in enumerate(turns):
        calls = [vf.ToolCall(id=f"call_{k}_{i}", name=c.name, arguments=json.dumps(dict(c.arguments)))
                 for i, c in enumerate(turn.tool_calls)]
        messages.append(vf.AssistantMessage(content=reply_text(fmt, turn.action_text), tool_calls=calls or None))
        if not turn.observation:
            continue
        if calls or fmt.parse(turn.action_text).attempted:
            messages.append(vf.ToolMessage(tool_call_id=calls[0].id if calls else "error", content=turn.observation))
        else:
            messages.append(vf.UserMessage(content=turn.observation))
    return messages


def vf_trace(vf_task, messages: list):
    """A verifiers `Trace` of `messages` (the policy's own messages sampled), as its rollout records one."""
    import verifiers.v1 as vf
    from verifiers.v1.trace import AgentInfo, TraceTask

    nodes = [vf.MessageNode(parent=i - 1 if i else None, message=m, sampled=m.role == "assistant")
             for i, m in enumerate(messages)]
    return vf.Trace(task=TraceTask(type=type(vf_task).__name__, data=vf_task.data),
                    agent=AgentInfo(config=vf.AgentConfig()), nodes=nodes)


@dataclasses.dataclass(frozen=True)
class VerifiersReward:
    """The task's own scoring on the episode's transcript: the weighted sum of its rewards."""

    source: Source
    format_name: str = "hermes"

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        vf_task = self.source.tasks[task.meta["idx"]]
        trace = vf_trace(vf_task, transcript(trajectory, vf_task, get_format(self.format_name)))
        _run(vf_task.score(trace))
        details = {name: r.score for name, r in trace.rewards.items() if r is not None}
        return Score(trace.reward, {**details, **{f"metric/{k}": v for k, v in trace.metrics.items() if v is not None}})


def vf_spec(argument: str) -> EnvSpec:
    """The EnvSpec of `vf:ARGUMENT`: a taskset id, or `module:function` returning an Env or Taskset."""
    source = load_source(argument)

    def tasks(split: str, n: int, seed: int) -> list[Task]:
        pool = [t for t in source.tasks if split_of(t.data.idx) == split]
        chosen = random.Random(seed).sample(pool, min(n, len(pool)))
        return [Task(id=f"vf:{argument}-{t.data.idx}", prompt=t.data.prompt_text,
                     answer=getattr(t.data, "answer", None), meta={"idx": t.data.idx, "split": split})
                for t in chosen]
    return EnvSpec(name=f"vf:{argument}", make_env=lambda options: VerifiersEnv(source, options),
                   make_reward=lambda options: VerifiersReward(source, options.get("format", "hermes")),
                   tasks=tasks, splits=SPLITS, options=OPTIONS)


SPLITS = ("train", "heldout")


def split_of(idx: int) -> str:
    """A taskset has no splits: every tenth task (by its place in `load()`) is held out."""
    return "heldout" if idx % 10 == 9 else "train"
