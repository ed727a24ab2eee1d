"""What the recording proxy keeps of an agent's calls, and the exact training rows it makes of them.

An agent program talks to the proxy through the OpenAI chat API; every call of one episode (the
episode id is in the URL: `/episodes/{id}/v1`) is recorded as the token ids the policy was fed, the
ids it sampled and their logprobs.

**No re-tokenization of the policy's own words.** When a request's history holds an assistant
message the proxy itself produced in this episode (the same text and tool calls), the prompt is
built with the ids sampled for it, not with a rendering of its text: the chat template renders the
history with a marker in that message's place, the text around the markers is tokenized, and the
sampled ids go in between (less the end-of-turn token the template writes after them when the sample
already ended with it). Whatever this builds is what the policy is fed, so a recorded call is exact
by construction.

**Templates that rewrite history** (`history`). Some chat templates do not render an earlier reply as
it was sampled: a Qwen3-style template lays reasoning out its own way and drops it once a user speaks
again (`models/chat_template.REASONING_CHATML_TEMPLATE`). Per recorder, a documented choice:
`keep` (the default) feeds every reply sent back as sampled, so the episode stays one context and
the policy sees its whole history, as at sampling time; `template` feeds what the template renders
wherever that differs from the sample (found by rendering the real message and comparing), as the
model would see it deployed; the episode then starts a new context there.

**One trajectory when the calls extend each other.** When a call's prompt starts with the previous
call's prompt and completion (an append-only template, the agent sending its history back
unedited), the episode is one multi-turn trajectory: each later prompt's new tokens are an
observation (masked), each completion an action. When one does not (the agent edited or dropped
history; a template that rewrites earlier turns), the episode starts a new context there: the call's
whole prompt is fed as it is (`Turn.restart`), and the trajectory trains each context as its own
exact row, the episode still one sample of its group. Nothing is silently re-tokenized.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.types import Task, ToolCall, Trajectory, Turn

HISTORY = ("keep", "template")
MARK = "\ue000{}\ue001"  # private-use code points: no chat template or agent writes them
_MARKS = re.compile("\ue000(\\d+)\ue001")


@dataclass(frozen=True)
class Call:
    """One chat completion the proxy answered in an episode."""

    prompt_ids: tuple[int, ...]
    ids: tuple[int, ...]  # sampled
    logprobs: tuple[float, ...]
    text: str  # the sampled ids decoded
    stop_reason: str  # eos | stop | length (the engine's)
    message: dict  # the assistant message returned to the agent (content, tool_calls)
    version: int  # the policy version that sampled it


@dataclass
class Episode:
    id: str
    calls: list[Call] = field(default_factory=list)
    reward: float | None = None


def tool_call_key(calls: Sequence[dict] | None) -> tuple:
    """Tool calls compared by name and parsed arguments (agents re-serialize the JSON)."""
    out = []
    for c in calls or ():
        f = c.get("function", c)
        args = f.get("arguments", {})
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            pass
        out.append((f.get("name"), json.dumps(args, sort_keys=True)))
    return tuple(out)


def same_message(m: dict, reply: dict) -> bool:
    """Whether the agent's assistant message `m` is the proxy's `reply` sent back unedited."""
    return ((m.get("content") or "").strip() == (reply.get("content") or "").strip()
            and tool_call_key(m.get("tool_calls")) == tool_call_key(reply.get("tool_calls")))


class Recorder:
    """Episodes by id, shared by the server's request threads."""

    def __init__(self, tokenizer, eos_ids: Sequence[int] = (), history: str = "keep"):
        if history not in HISTORY:
            raise ValueError(f"history: one of {', '.join(HISTORY)} (got {history!r})")
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(eos_ids)
        self.history = history
        self.episodes: dict[str, Episode] = {}
        self.lock = threading.Lock()

    def episode(self, eid: str) -> Episode:
        with self.lock:
            return self.episodes.setdefault(eid, Episode(eid))

    def prompt_ids(self, eid: str, messages: list[dict], tools: list | None, render) -> list[int]:
        """The ids to feed the policy for `messages` in episode `eid`: the chat template's rendering
        (`render(messages, tools) -> text`), with this episode's own replies spliced in as sampled."""
        replies = list(self.episode(eid).calls)
        shown, spliced, used = list(messages), [], 0
        for i, m in enumerate(messages):
            match = next((j for j in range(used, len(replies)) if m.get("role") == "assistant"
                          and same_message(m, replies[j].message)), None)
            if match is None:
                continue
            used = match + 1
            marked = [*shown[:i], {"role": "assistant", "content": MARK.format(len(spliced))}, *shown[i + 1 :]]
            if self.history == "template" and not self._as_sampled(replies[match], render(marked, tools),
                                                                    render(shown, tools), len(spliced)):
                continue  # the template rewrites this reply: it is fed as rendered
            shown = marked
            spliced.append(replies[match])
        return self._splice(render(shown, tools), spliced)

    def _as_sampled(self, reply: Call, marked: str, real: str, k: int) -> bool:
        """Whether the template renders the reply, in this conversation, as the text it sampled
        (`marked` and `real`: the conversation rendered with the reply as marker `k` and as itself)."""
        before, _, after = marked.partition(MARK.format(k))
        ids = reply.ids[:-1] if reply.ids and reply.ids[-1] in self.eos_ids else reply.ids
        shown = real[len(before) : len(real) - len(after)] if real.startswith(before) and real.endswith(after) else None
        return shown == self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def _splice(self, text: str, spliced: list[Call]) -> list[int]:
        parts = _MARKS.split(text)  # text, index, text, index, ..., text
        ids = self._encode(parts[0])
        for k in range(1, len(parts), 2):
            call, after = spliced[int(parts[k])], parts[k + 1]
            ids += call.ids
            if call.ids and call.ids[-1] in self.eos_ids:  # the template's end of turn, already sampled
                eos = self.tokenizer.decode([call.ids[-1]])
                after = after.removeprefix(eos)
            ids += self._encode(after)
        return ids

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def record(self, eid: str, call: Call) -> None:
        ep = self.episode(eid)
        with self.lock:
            ep.calls.append(call)

    def set_reward(self, eid: str, reward: float) -> None:
        self.episode(eid).reward = float(reward)

    def pop(self, eid: str) -> Episode:
        with self.lock:
            return self.episodes.pop(eid, Episode(eid))


def rows(calls: Sequence[Call]) -> list[list[Call]]:
    """The calls in runs where each call's prompt extends the previous prompt + completion."""
    out: list[list[Call]] = []
    seen: tuple[int, ...] = ()
    for c in calls:
        if out and c.prompt_ids[: len(seen)] == seen:
            out[-1].append(c)
        else:
            out.append([c])
        seen = c.prompt_ids + c.ids
    return out


def trajectory(episode: Episode, task: Task, reward: float = 0.0, details: Any = None) -> Trajectory | None:
    """The episode as one trajectory (one sample of its group), or None when it made no call: each
    run of extending calls is a context of its own, the first call of every later run a
    `Turn.restart` whose observation is that call's whole exact prompt."""
    turns: list[Turn] = []
    for run in rows(episode.calls):
        seen = 0
        for j, c in enumerate(run):
            turns.append(Turn(c.prompt_ids[seen:], c.ids, c.logprobs, c.text, c.stop_reason,
                              tool_calls=tuple(_calls(c.message)), restart=j == 0 and bool(turns)))
            seen = len(c.prompt_ids) + len(c.ids)
    if not turns:
        return None
    return Trajectory(task, tuple(turns), reward=reward, reward_details=dict(details or {}), terminated=True)


def _calls(message: dict) -> list[ToolCall]:
    out = []
    for c in message.get("tool_calls") or ():
        try:
            out.append(ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"])))
        except (KeyError, json.JSONDecodeError, TypeError):
            continue
    return out
